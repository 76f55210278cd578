#!/bin/bash
# Ninth session: kernel 9's two outputs per thread as a consecutive pair of one page (sharing the
# page's division and row; all-direct plans with an even page) against the grid-stride pairs
# (KINFER_GPU_LEAN_PAIRS=0), same process: the kernel test both ways, pe --check linkage_11/17,
# the M = 2 shape S2 and pedigree50's shapes 89 and 44, pedigree50's slices (timelines, A/B).
# Bundle: bench/e2e/bundle.sh build .dev-pairs SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin pairs
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'kernel 9:' $R/test_gpu_kernel.txt | head -2
( cd $B && KINFER_GPU_LEAN_PAIRS=0 KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel_grid.txt 2>&1; echo "grid-stride pairs: exit $?"; tail -2 $R/test_gpu_kernel_grid.txt
e2e_gpu_kernel_case GpuKernel.Kernel9CasesMatchCpu k9-full.txt
e2e_check linkage_11 linkage_17 linkage_13
e2e_shapes_ab pair grid:KINFER_GPU_LEAN_PAIRS=0 2:$S2 89:$S89 44:$S44
for i in 0 1; do
  e2e_pe_timeline p50-pair-$i pedigree50
  e2e_pe_timeline p50-grid-$i pedigree50 KINFER_GPU_LEAN_PAIRS=0
done
for i in 0 1; do
  e2e_pe_timeline l11-pair-$i linkage_11
  e2e_pe_timeline l11-grid-$i linkage_11 KINFER_GPU_LEAN_PAIRS=0
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
