#!/bin/bash
# Sixth session, call 6: closing check of main (module preloaded; the conditioning's second
# search skipped when the first order conditioned is within 5%): pedigree50's trails, GPU kernel
# test, --check, the cold auto vs cpu table and pedigree50, and the auto rows with the helper exit.
# Bundle: bench/e2e/bundle.sh build .dev-final17 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final17
for i in 1 2; do
  timeout 60 $k pe $D/pedigree50.uai --json --order-cache none --max-memory 60G -v > $R/p50-$i.json 2> $R/p50-$i.log
  echo "pedigree50 rc=$? $(grep -h "plan: \|conditioning on\|command's end" $R/p50-$i.log | cut -c 16-200)"
done
sed -i '/kernel plan of/d' $R/p50-*.log
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
e2e_helper_rows linkage_11 linkage_12 linkage_13 linkage_17
e2e_end 12
