#!/bin/bash
# Thirteenth session: the kernel test with the case for kernel 9's tile (GpuKernel.Kernel9TileMatchesCpu),
# at the usual scale and that case at full scale.
# Bundle: bench/e2e/bundle.sh build .dev-k9test2 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin k9test2
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep -E "kernel 9|FAILED" $R/test_gpu_kernel.txt | head -8
e2e_gpu_kernel_case GpuKernel.Kernel9TileMatchesCpu tile-full.txt; tail -3 $R/tile-full.txt
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
