#!/bin/bash
# Sixth session, call 4 (the module preloaded, plan_costs on every thread, the context left to
# the driver's release at pe's exit; the last two measured here and taken out again): the
# teardown A/B (KINFER_GPU_TEARDOWN=1 was the old end), GPU kernel test, --check, the cold auto vs
# cpu table and pedigree50, trails, and the auto rows with the helper exit.
# Bundle: bench/e2e/bundle.sh build .dev-final16 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final16
python3 $B/ab.py --kinfer "$k" --data $D --rounds 4 --out $R/ab.tsv \
  --mode kept= --mode teardown=KINFER_GPU_TEARDOWN=1 linkage_17 linkage_13 linkage_14 | tee $R/ab.txt
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
e2e_cold3 linkage_17 linkage_13
e2e_helper_rows linkage_11 linkage_12 linkage_13 linkage_17
e2e_end 12
