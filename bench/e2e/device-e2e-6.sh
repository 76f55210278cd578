#!/bin/bash
# Issue 12, end to end, after call 5 (device-e2e-5.sh): without --seed the search goes on while the
# device is still starting (OrderOptions::keep_searching); the GPU-sized floor 2 starts (0.6 core-s)
# at 6 core-s per second; also seeded runs (--seed 1: work-based only) of linkage_11 and 17.
# Bundle: bench/e2e/bundle.sh build .dev-e2e6 ../shared/data/uai
. "$(dirname "$0")/lib.sh"
e2e_begin e2e6
e2e_cold3 linkage_11 linkage_17 linkage_13 linkage_12 linkage_14 linkage_18 linkage_21
for n in linkage_11 linkage_17; do
  eval $t "$n-seed1=\"pe $D/$n.uai --json --order-cache none --seed 1\"" "$n-seed1b=\"pe $D/$n.uai --json --order-cache none --seed 1\""
done
e2e_tables linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11 Pedigree_13 pedigree1
e2e_check linkage_17 linkage_12
e2e_end 5
