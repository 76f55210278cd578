#!/bin/bash
# Issue 12, the closing check of this session's code (main after device-e2e-6: rounds of 32
# restarts + 12 chains of 8 moves, the search at 6 core-s per second with a floor of 2 device
# starts, the profile read beside the background start, the placement kept from the auto
# decision, the later rounds' start with 2x fewer states, no extension past the target). Trail
# (-v) of cold --device auto runs, the auto vs cpu table, pedigree50, --check, GPU kernel test.
# Bundle: bench/e2e/bundle.sh build .dev-e2e7 ../shared/data/uai
. "$(dirname "$0")/lib.sh"
e2e_begin e2e7
e2e_cold3 linkage_11 linkage_17 linkage_13 linkage_12 linkage_14 linkage_18 linkage_21
for n in linkage_11 linkage_17; do  # warm: the first run fills the order cache
  eval $t "$n-fill=\"pe $D/$n.uai --json\"" "$n-warm1=\"pe $D/$n.uai --json\"" "$n-warm2=\"pe $D/$n.uai --json\""
done
e2e_tables linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11 Pedigree_13 pedigree1
e2e_gpu_kernel_test
e2e_check linkage_17 linkage_12 linkage_11
e2e_end 5
