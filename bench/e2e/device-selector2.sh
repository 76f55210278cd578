#!/bin/bash
# Fifth session, call 9: the selector's two-lane rule (cached once staged values are used twice):
# the GPU kernel test, --check linkage_17, and the buckets >= 2^26 states of linkage_17 (with
# the merged rows) and linkage_11 timed (both variants and the selector's choice).
# Bundle: bench/e2e/bundle.sh build .dev-selector2 SHARED_UAI (keep bench/gpu/bucket_bench)
. "$(dirname "$0")/lib.sh"
e2e_begin selector2
e2e_gpu_kernel_test
e2e_check linkage_17
for n in linkage_17 linkage_11; do
  timeout 150 $B/run bench/gpu/bucket_bench --network $D/$n.uai --min-log2 26 --threads 16 --repeats 5 \
    --cpu-runs 1 --no-f32 --merge --out $R/$n.tsv > $R/bench-$n.log 2>&1
  echo "buckets $n rc=$?"
  awk -F'\t' 'NR>1 && $25==2 {printf "%s %s M=%s lanes=%s plain=%s cached=%s auto=%s %s roof=%s\n", $1, $2, $4, $25, $13, $14, $15, $10, $17}' $R/$n.tsv
done
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
