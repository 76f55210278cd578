#!/bin/bash
# Fifth session, call 1 (kernel 6: the small factor inputs multiplied together before the
# kernels, gpu/merge_inputs.hpp rule 1): GPU kernel test and --check with the merges, every
# bucket >= 2^27 states of linkage_17/11/13 as the plan has it and as the executor merges it
# (bucket_bench --merge), and warm runs side by side (one cached order per network; merges off /
# on alternating, three rounds).
# Bundle: bench/e2e/bundle.sh build .dev-merge SHARED_UAI (keep bench/gpu/bucket_bench)
. "$(dirname "$0")/lib.sh"
e2e_begin merge
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17 linkage_13
for n in linkage_17 linkage_11; do
  timeout 100 $B/run bench/gpu/bucket_bench --network $D/$n.uai --min-log2 27 --threads 16 --repeats 5 \
    --cpu-runs 1 --no-f32 --merge --out $R/buckets-$n.tsv > /dev/null 2>&1
  echo "buckets $n rc=$?"; cut -f1,2,5,6,13,15,17,20,22 $R/buckets-$n.tsv
done
for i in 1 2 3; do
  KINFER_GPU_MERGE_SMALL=0 M --warm --out $R/warm-off-$i.tsv --devices auto --timeout 30 --deadline 60 \
    linkage_11 linkage_17
  M --warm --out $R/warm-on-$i.tsv --devices auto --timeout 30 --deadline 60 linkage_11 linkage_17
done
for f in $R/warm-*.tsv; do echo "$(basename $f) $(cut -f1,3,5 $f | tail -n +2 | tr '\t\n' '  ')"; done
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
