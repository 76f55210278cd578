#!/bin/bash
# The kernel test with its kernel 9 case (each of kernel 9's four compiled families on random
# one-lane buckets), at the usual scale and that case alone at full scale (40 buckets a family).
# Bundle: bench/e2e/bundle.sh build .dev-k9test SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin k9test
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep -E 'kernel 9:|kernel variants' $R/test_gpu_kernel.txt
( cd $B && KINFER_GPU_TEST_SCALE=1 timeout 120 ./run tests/test_gpu_kernel "GpuKernel.Kernel9CasesMatchCpu" ) > $R/k9-full.txt 2>&1; echo "full-scale kernel 9 case exit $?"; grep -E 'kernel 9:|passed|FAILED' $R/k9-full.txt | head -5
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
