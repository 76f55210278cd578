#!/bin/bash
# Fifth session's closing check of main (kernels 6-7, the selector's one- and two-lane rules,
# the profiles of kernel generation 7): GPU kernel test, --check, the cold auto vs cpu table and
# pedigree50, and the auto rows with the helper exit.
# Bundle: bench/e2e/bundle.sh build .dev-final14 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final14
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_12 linkage_13 linkage_17
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
e2e_helper_rows linkage_11 linkage_12 linkage_13 linkage_17
grep -l "older\|generation" $R/*.txt 2>/dev/null | head -3
e2e_end 12
