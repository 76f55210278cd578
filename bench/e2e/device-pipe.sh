#!/bin/bash
# Tenth session: kernel 9's compiled terms finished one output behind their loads (the next
# output's loads issued before this one's exp, log and store), measured as fixed3 (compiled
# against the chunk loop, KINFER_GPU_LEAN_FIXED=0, in one process; fixed3's compiled numbers are
# the build without the pipelining): the kernel test (its fixed-terms case at
# full scale too), pe --check linkage_11/17/13, shapes of M = 2, 3, 4 (as in fixed2) and of M = 6
# and 8, direct and mixed (pedigree50's shape 89 / S4M with other summed cardinalities, one
# output variable 5 -> 2), the census's random set of seed 5 (buckets 0-12: random 10 and 12
# are one-lane, M = 2 and 6), and pe timelines of linkage_11/17 and pedigree50 both ways.
# Bundle: bench/e2e/bundle.sh build .dev-pipe SHARED_UAI (bench/gpu kept), sent as a .tgz
. "$(dirname "$0")/lib.sh"
e2e_begin pipe
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'kernel 9' $R/test_gpu_kernel.txt | head -3
e2e_gpu_kernel_case GpuKernel.Kernel9FixedTermsMatchCpu k9fixed-full.txt
e2e_check linkage_11 linkage_17 linkage_13
e2e_shapes_ab fixed loop:KINFER_GPU_LEAN_FIXED=0 2:$S2 89:$S89 44:$S44 4m:$S4M 6:$S6 6m:$S6M 8:$S8 8m:$S8M
e2e_timelines_ab 1 fixed loop KINFER_GPU_LEAN_FIXED=0 linkage_11 linkage_17 pedigree50
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
