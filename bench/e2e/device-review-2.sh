#!/bin/bash
# After the review of the second session's change (one profile lookup, start_if_likely's
# discount, the search's hand-out order written once): GPU kernel test, --check, cold auto runs
# with their trail (the profile read beside the background start), the auto vs cpu table.
# Bundle: bench/e2e/bundle.sh build .dev-review2 ../shared/data/uai
. "$(dirname "$0")/lib.sh"
e2e_begin review2
e2e_cold3 linkage_11 linkage_17 linkage_21
e2e_tables linkage_11 linkage_17 linkage_21 Pedigree_11
e2e_gpu_kernel_test
e2e_check linkage_13
grep -h "profile:" $R/trail/linkage_11-cold2.log | head -1
e2e_end 5
