#!/bin/bash
# Eleventh session, closing table on the final build (reuse_order and the huge-page plan tables;
# it ran again as FINAL_NAME=final32 on the build with the kept pinned buffers, call 9):
# device-final-30.sh's steps (every shared network cold under `--device cpu`, 16 cores, then
# `--device auto`, `--max-memory 100G`; pedigree50 under 60G x3, 100G, the default; every auto
# run again at the end), with the kernel test and pe --check linkage_11/12/17 first.
# Bundle: bench/e2e/bundle.sh build .dev-${FINAL_NAME:-final31} SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin ${FINAL_NAME:-final31}
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'REUSE' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_12 linkage_17
e2e_closing $E2E_SHARED_NETS
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
