#!/bin/bash
# Sixth session: the closing table of main on the H200 (its shipped profile): GPU kernel test,
# --check, the cold auto vs cpu table and pedigree50.
# Bundle: bench/e2e/bundle.sh build .dev-h200final SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin h200final
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 Pedigree_11
e2e_end 12
