#!/bin/bash
# Eleventh session, closing table on the final build (reuse_order on top of the tenth session's
# final29 build): the kernel test and pe --check linkage_11/17 first; every shared network cold
# under `--device cpu` (16 cores) and right after it `--device auto` (`--max-memory 100G`, the
# issue's command; the ordinary exit); pedigree50 under 60G (three), 100G and the default
# limit; every network's auto run again at the end (back to back).
# Bundle: bench/e2e/bundle.sh build .dev-final30 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final30
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
e2e_closing $E2E_SHARED_NETS
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
