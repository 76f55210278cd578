#!/bin/bash
# Eleventh session, second call: reuse_order with its condition on the table's weight (the
# largest input >= 1.5 x the outputs and other inputs: pedigree50's M = 3 buckets and
# linkage_11's 529/595/591/524, slower in device-reuse, no longer reordered). The kernel test,
# pe timelines both ways (KINFER_GPU_REUSE_ORDER=0: the order before) of pedigree50 and the
# linkage networks, and bucket_bench's census of linkage_11/17/12 both ways.
# Bundle: bench/e2e/bundle.sh build .dev-reuse2 SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin reuse2
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'REUSE' $R/test_gpu_kernel.txt | head -3
e2e_check linkage_11 linkage_17 linkage_12
e2e_timelines_ab 2 reuse before KINFER_GPU_REUSE_ORDER=0 pedigree50 linkage_11 linkage_12 linkage_13 linkage_17 linkage_18
for n in linkage_17:100 linkage_12:100 linkage_11:170; do
  timeout ${n#*:} $B/run bench/gpu/bucket_bench --config reuse --config before:KINFER_GPU_REUSE_ORDER=0 \
    --network $D/${n%:*}.uai --min-log2 26 --threads 16 --repeats 3 --cpu-runs 1 --no-f32 \
    --out $R/census-${n%:*}.tsv > $R/census-${n%:*}.log 2>&1
  echo "census $n rc=$?"
done
for c in reuse before; do
  for n in linkage_17 linkage_12 linkage_11; do
    [ -f $R/${c}_census-$n.tsv ] && awk -F'\t' -v c=$c 'NR>1 && $8>=1 {printf "%s %s %s %s %s %s %.3f %.2f\n", c, $1, $2, $3, $4, $10, $15, $20}' $R/${c}_census-$n.tsv
  done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
