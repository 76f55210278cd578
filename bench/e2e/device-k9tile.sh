#!/bin/bash
# Thirteenth session: kernel 9's tile of two outputs (one-lane plans with terms compiled in and
# direct inputs share the loads of inputs without a binary output variable over two outputs).
# The kernel test (its KINFER_GPU_TILES=force variant runs the tile on small plans), pe --check
# linkage_11/17/18, then bucket_bench on the census's one-lane shapes with the tile (default)
# and without (KINFER_GPU_LEAN_TILES=0), then pe's own runs both ways (timelines, two rounds).
# Bundle: bench/e2e/bundle.sh build .dev-k9tile SHARED_UAI (bench/gpu kept).
. "$(dirname "$0")/lib.sh"
e2e_begin k9tile
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep -E "kernel 9's tile|FAILED" $R/test_gpu_kernel.txt | head -5
e2e_check linkage_11 linkage_17 linkage_18
while read name spec; do
  timeout 60 $B/run bench/gpu/bucket_bench --config tile --config notile:KINFER_GPU_LEAN_TILES=0 \
    --shape $spec --no-f32 --cpu-runs 1 --repeats 5 --out $R/$name.tsv > $R/$name.txt 2>&1
  echo "== $name rc=$?"; grep -E "^ *(tile|notile) " $R/$name.txt
done <<'SHAPES'
linkage_17-221 2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,3,2,2,3,2,2,2/3/3,4,5,6,7,8,9,10,11,12,15,16,17,18,19,20,21,22,23,24,25,26,27/0,1,2,5,8,11,13,14,15,21,24,25,26,27
linkage_17-256 2,2,2,2,2,2,2,2,2,2,2,2,2,3,2,3,2,2,3,2,3,2,2,2,2,2/3/0,1,2,3,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25/4,13,15,18,20,23,24,25
linkage_18-676 2,2,2,2,2,2,2,2,2,2,2,2,2,4,2,2,2,2,2,4,2,2,2,2,2,2/2/1,3,6,8,9,12,14,15,16,17,18,20,21,22,23,24,25/0,2,4,5,7,12,13,16,17,18,19,20,21,22,23,24,25/10,11,12,13,16,17,18,19,20,21,22,23,24,25
linkage_11-595 2,2,3,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,3,3,2,2,2,3,3,2/1/0,2,3,4,5,6,7,8,9,10,11,13,14,16,17,18,19,20,21,22,23,24,25,26/1,12,15,19,24,26/20,25,26
linkage_11-529 2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2/1/0,2,3,4,5,6,7,8,9,10,12,13,15,16,17,18,21,22,23,24,25,26,27,28,29/1,11,14,19,20,25,28,29
linkage_11-591 2,3,2,2,2,2,2,2,2,2,2,2,2,2,2,2,3,3,2,2,2,3,3,2,2/1/0,2,3,4,5,6,7,9,10,11,12,13,14,15,17,18,19,20,22,23,24/1,5,6,7,8,10,11,12,13,14,16,21,24
linkage_11-524 2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2/3/0,1,2,4,5,7,8,9,10,11,12,13,15,16,17,18,19,20,21,22,24,25,26,27/2,3,4,5,6,8,9,10,11,14,23,25,26,27
linkage_11-127 2,2,2,2,2,2,2,2,2,3,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2/2/4,7,9,10,11,12,13,14,18,21,22,23,24,25,26,27,28,29,30/0,1,2,3,5,6,8,15,16,17,19,20,21,22,24,25,26,27,29,30
SHAPES
e2e_timelines_ab 2 tile notile KINFER_GPU_LEAN_TILES=0 linkage_11 linkage_17 linkage_18 linkage_12 pedigree50
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
