#!/bin/bash
# Fifth session, call 8: the selector's one-lane threshold at 1 byte per term (was 2): the GPU
# kernel test, --check linkage_11, and the buckets >= 2^26 states of linkage_11 and the random
# set of call 6 timed again (both variants and the selector's choice).
# Bundle: bench/e2e/bundle.sh build .dev-selector SHARED_UAI (keep bench/gpu/bucket_bench)
. "$(dirname "$0")/lib.sh"
e2e_begin selector
e2e_gpu_kernel_test
e2e_check linkage_11
timeout 120 $B/run bench/gpu/bucket_bench --network $D/linkage_11.uai --min-log2 26 --threads 16 --repeats 5 \
  --cpu-runs 1 --no-f32 --out $R/linkage_11.tsv > $R/bench-linkage_11.log 2>&1
echo "buckets linkage_11 rc=$?"
timeout 100 $B/run bench/gpu/bucket_bench --random 26 --min-log2 22 --max-log2 27 --threads 16 --repeats 5 \
  --cpu-runs 1 --no-f32 --out $R/random.tsv > $R/bench-random.log 2>&1
echo "buckets random rc=$?"
for f in $R/linkage_11.tsv $R/random.tsv; do
  awk -F'\t' 'NR>1 && $25<=2 {s+=$15; printf "%s %s M=%s lanes=%s plain=%s cached=%s auto=%s %s\n", $1, $2, $4, $25, $13, $14, $15, $10} END {print "summed auto (1-2 lanes):", s}' $f
done
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
