#!/bin/bash
# Closing check of the third session on main (the exit through the helper): GPU kernel test,
# --check, three cold trail runs, single runs after 5 s idle, the auto vs cpu table, pedigree50.
# Bundle: bench/e2e/bundle.sh build .dev-final9 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final9
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17
e2e_cold3 linkage_11 linkage_17 linkage_13
for n in linkage_11 linkage_17 linkage_12 linkage_13; do
  for i in 1 2; do sleep 5; eval $t "$n-idle$i=\"pe $D/$n.uai --json --order-cache none\""; done
done
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
grep -h "" $R/trail/trail.tsv | cut -f1-4
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
e2e_end 5
