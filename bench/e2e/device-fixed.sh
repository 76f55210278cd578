#!/bin/bash
# Tenth session: kernel 9 compiled for 2 or 3 direct terms (KINFER_GPU_LEAN_FIXED=0: the chunk
# loop as before), same process: the kernel test (its new fixed-terms case at full scale too),
# pe --check linkage_11/17/13, the M = 2 shape S2, pedigree50's M = 3 shape 89 and M = 4 shape 44
# (unchanged: the control), and pe timelines of linkage_11/17 and pedigree50 both ways.
# Bundle: bench/e2e/bundle.sh build .dev-fixed SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin fixed
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'kernel 9' $R/test_gpu_kernel.txt | head -3
e2e_gpu_kernel_case GpuKernel.Kernel9FixedTermsMatchCpu k9fixed-full.txt
e2e_check linkage_11 linkage_17 linkage_13
e2e_shapes_ab fixed loop:KINFER_GPU_LEAN_FIXED=0 2:$S2 89:$S89 44:$S44
e2e_timelines_ab 2 fixed loop KINFER_GPU_LEAN_FIXED=0 linkage_11 linkage_17 pedigree50
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
