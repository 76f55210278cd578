#!/bin/bash
# Eleventh session: outputs enumerated for the largest input's reuse (gpu/policy.cpp
# reuse_order; KINFER_GPU_REUSE_ORDER=0: the order before), same process: the kernel test (its
# new variant reorders every plan), pe --check linkage_11/17, pedigree50's largest shapes at 60G
# (bucket_bench --print-shapes 12 --max-memory 60e9 --order-time 1.31: buckets 209, 104 and 90
# reordered, 203 not: the control), pe timelines of pedigree50 and linkage_11/17 both ways, and
# bucket_bench's census of linkage_17 and linkage_12 (many of their large buckets reordered)
# both ways.
# Bundle: bench/e2e/bundle.sh build .dev-reuse SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin reuse
P209='4,6,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3/6/1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18/0,4,13,14,15,16,17,18'
P203='6,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3,3/1/0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,18/0,1,2,4,6,7,8,9,10,11,13,17,18'
P104='6,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3,3/1/0,1,2,4,6,7,8,9,10,11,12,15,18/0,1,3,4,5,7,8,12,13,14,16,17,18'
P90='6,5,3,6,2,5,6,2,5,5,3,3,2,2,3/2/1,5,13,14/0,2,3,4,6,7,8,9,10,11,12,13,14'
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'REUSE|kernel variants' $R/test_gpu_kernel.txt | head -3
e2e_check linkage_11 linkage_17
e2e_shapes_ab reuse before:KINFER_GPU_REUSE_ORDER=0 209:$P209 104:$P104 90:$P90 203:$P203
e2e_timelines_ab 2 reuse before KINFER_GPU_REUSE_ORDER=0 pedigree50 linkage_11 linkage_17
for n in linkage_17 linkage_12; do
  timeout 120 $B/run bench/gpu/bucket_bench --config reuse --config before:KINFER_GPU_REUSE_ORDER=0 \
    --network $D/$n.uai --min-log2 26 --threads 16 --repeats 3 --cpu-runs 1 --no-f32 \
    --out $R/census-$n.tsv > $R/census-$n.log 2>&1
  echo "census $n rc=$?"
done
for c in reuse before; do
  for n in linkage_17 linkage_12; do
    [ -f $R/${c}_census-$n.tsv ] && awk -F'\t' -v c=$c 'NR>1 && $8>=1 {printf "%s %s %s %s %s %s %.3f %.2f\n", c, $1, $2, $3, $4, $10, $15, $20}' $R/${c}_census-$n.tsv
  done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
