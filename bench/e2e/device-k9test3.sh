#!/bin/bash
# Thirteenth session: the final build (kernel 9's tile for 2, 4 and 8 terms only): the kernel
# test, its tile case at full scale, pe --check linkage_11/17/18, and pedigree50's timeline.
# Bundle: bench/e2e/bundle.sh build .dev-k9test3 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin k9test3
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep -E "kernel 9|FAILED" $R/test_gpu_kernel.txt | head -8
e2e_gpu_kernel_case GpuKernel.Kernel9TileMatchesCpu tile-full.txt; tail -3 $R/tile-full.txt
e2e_check linkage_11 linkage_17 linkage_18
e2e_pe_timeline pedigree50-0 pedigree50
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
