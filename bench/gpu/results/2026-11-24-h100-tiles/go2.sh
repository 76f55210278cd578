#!/usr/bin/env bash
# device call 2-3 (kernel 5: tiles of 2 with the tile's inputs known at compile time, on by default
# for 3+ varying inputs): untiled (`main`, KINFER_GPU_TILES=0) against the default (`tiles`) in
# one process, linkage_11/12/13/17/18 buckets >= 2^27 states and 2 random buckets; the GPU tests
# under the default (tiles on), ncu of the tiled kernel on linkage_17's largest bucket, memcheck.
# usage (on the GPU machine, from the bundle): bash go2.sh OUT
cd "$(dirname "$0")"
D=$(pwd)
mkdir -p "$1"
/usr/local/cuda/bin/cuobjdump -res-usage new/bench/gpu/bucket_bench 2>&1 | grep -A1 -E "plain3_kernelIdLi[2-8]ELi(0|4|8|32)ELi[012]E" \
  | grep -oE "Function [^ :]*|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+" | paste - - - - > "$1/res_usage.txt" 2>&1
export CONFIGS="main:KINFER_GPU_TILES=0 tiles:KINFER_GPU_TILES=1"
export NETS="linkage_17 linkage_13 linkage_18 linkage_11 linkage_12" MIN_LOG2=27 NRANDOM=2
export TEST_SCALE=0.05 TEST_TIME=100 DEADLINE=${DEADLINE:-480}
export PROFS="l17t:linkage_17:31:plain3_kernel"
bash ./kernel_variants.sh . "$1"
# the default (no KINFER_GPU_TILES) on the largest linkage_17 bucket: tiles on?
KINFER_DATA="$D/data" timeout 60 new/run bench/gpu/bucket_bench --network "$D/data/uai/linkage_17.uai" --min-log2 31 --repeats 3 --cpu-runs 1 --no-f32 --threads 16 --out "$1/default_l17.tsv" > /dev/null 2>&1
cut -f2,13,31 "$1/default_l17.tsv" | tee -a "$1/summary.txt"
