#!/bin/bash
# Thirteenth session, closing table on the final build (the profile derived for a GPU no profile
# knows, the CPU part scaled to the thread count; on the H100 with its own profile and 16 threads
# neither changes a run): the kernel test and pe --check linkage_11/12/17, then every shared
# network cold under `--device cpu`, 16 cores, then `--device auto`, `--max-memory 100G`;
# pedigree50 under 60G x3, 100G, the default; every auto run again at the end.
# Bundle: bench/e2e/bundle.sh build .dev-final35 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin ${FINAL_NAME:-final35}
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'DEVICE_FILL' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_12 linkage_17
e2e_closing $E2E_SHARED_NETS
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
