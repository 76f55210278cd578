#!/usr/bin/env bash
# device call 4 (kernel 5, tiles for 9-12 varying inputs too): untiled (`main`, KINFER_GPU_TILES=0),
# the default (`tiles`) and `force` (a tile of 2 wherever the planner finds one: 1-2 varying inputs,
# launches that no longer fill the device) in one process, linkage_11/12/13/17/18 buckets >= 2^27
# states and 2 random buckets; the GPU tests under the default, memcheck; no profiler.
# usage (on the GPU machine, from the bundle): bash go4.sh OUT
cd "$(dirname "$0")"
D=$(pwd)
mkdir -p "$1"
/usr/local/cuda/bin/cuobjdump -res-usage new/bench/gpu/bucket_bench 2>&1 | grep -A1 -E "plain3_kernelIdLi([2-8]|12)ELi(0|4|8|32)ELi[012]E" \
  | grep -oE "Function [^ :]*|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+" | paste - - - - > "$1/res_usage.txt" 2>&1
export CONFIGS="main:KINFER_GPU_TILES=0 tiles:KINFER_GPU_TILES=1 force:KINFER_GPU_TILES=force"
export NETS="linkage_17 linkage_13 linkage_18 linkage_11 linkage_12" MIN_LOG2=27 NRANDOM=2
export TEST_SCALE=0.05 TEST_TIME=100 DEADLINE=${DEADLINE:-480}
bash ./kernel_variants.sh . "$1" quick
