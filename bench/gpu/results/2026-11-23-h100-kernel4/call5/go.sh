#!/usr/bin/env bash
# device call 5 (kernel 4, final defaults): tests of the new build, linkage_13/17 buckets >= 2^27
# states and 2 random buckets under main's build and four configurations of the new one, memcheck
cd "$(dirname "$0")"
D=$(pwd)
mkdir -p "$1"
/usr/local/cuda/bin/cuobjdump -res-usage new/bench/gpu/bucket_bench 2>&1 | grep -A1 -E "plain3_kernelIdLi[2-7]ELi(0|4|8|32)E|cached_kernelIdLi[2-8]ELb1E" \
  | grep -oE "Function [^ :]*|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+" | paste - - - - > "$1/res_usage.txt" 2>&1
export NEW_CONFIGS="new l2:KINFER_GPU_LANES=2:64 l128:KINFER_GPU_LANES=4:128 old:KINFER_GPU_LANES=32:16"
export BENCHES="linkage_13:--network,\$D/data/uai/linkage_13.uai,--min-log2,27,--cpu-runs,1,--no-f32 linkage_17:--network,\$D/data/uai/linkage_17.uai,--min-log2,27,--cpu-runs,1,--no-f32 random:--random,2,--min-log2,26,--max-log2,28.5,--seed,5,--cpu-runs,1,--no-f32"
export TEST_SCALE=0.1 TEST_TIME=60 SKIP_LARGE=1 DEADLINE=${DEADLINE:-260} MEMCHECK_SCALE=0.003 MEMCHECK_TIME=40
export MEMCHECK_TESTS="GpuKernel.KernelVariantsMatchCpu,GpuKernel.RandomBucketsMatchCpu,GpuKernel.ManyInputsMatchCpu,GpuKernel.NothingVariesWithTheSumMatchesCpu"
bash ./kernel_compare.sh . "$1"
