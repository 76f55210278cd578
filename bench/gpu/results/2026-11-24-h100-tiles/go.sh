#!/usr/bin/env bash
# device call (issue 12 part 4, kernel 3 tiles of 2): the tiled plain kernel against the default
# in one process (bucket_bench --config), linkage_13/17/18 buckets >= 2^27 states and 2 random
# buckets; the GPU tests (tiles forced in KernelVariantsMatchCpu), then the UAI networks and
# random buckets with tiles on, ncu of the untiled and tiled kernel on linkage_17's largest
# many-input bucket, memcheck.
# usage (on the GPU machine, from the bundle): bash go.sh OUT
cd "$(dirname "$0")"
D=$(pwd)
mkdir -p "$1"
/usr/local/cuda/bin/cuobjdump -res-usage new/bench/gpu/bucket_bench 2>&1 | grep -A1 -E "plain3_kernelIdLi[2-8]ELi(0|4|8|32)ELi[12]E" \
  | grep -oE "Function [^ :]*|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+" | paste - - - - > "$1/res_usage.txt" 2>&1
export CONFIGS="main tiles:KINFER_GPU_TILES=1"
export NETS="linkage_17 linkage_13 linkage_18" MIN_LOG2=27 NRANDOM=2
export TEST_SCALE=0.05 TEST_TIME=90 DEADLINE=${DEADLINE:-420}
export PROFS="l17u:linkage_17:31:plain3_kernel l17t:linkage_17:31:plain3_kernel:KINFER_GPU_TILES=1"
bash ./kernel_variants.sh . "$1"
# every network end to end and random buckets with tiles on (the default kernels above)
KINFER_GPU_TILES=1 KINFER_GPU_SKIP_LARGE=1 KINFER_GPU_TEST_SCALE=0.05 KINFER_DATA="$D/data" \
  timeout 90 new/run tests/test_gpu_kernel "GpuKernel.UaiNetworksMatchCpuAndReferences,GpuKernel.RandomBucketsMatchCpu,GpuKernel.LargeSummedRangesMatchCpu" \
  > "$1/test_tiles_on.log" 2>&1
echo "tests with KINFER_GPU_TILES=1 rc=$? $(grep -E 'test cases|All tests' "$1/test_tiles_on.log" | tail -1)" | tee -a "$1/summary.txt"
