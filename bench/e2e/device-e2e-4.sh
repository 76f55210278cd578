#!/bin/bash
# Issue 12, end to end, after (1) the order search's rounds of 32 restarts + 12 chains of 8 moves
# (were 16 + 4 of 12: the threads were 6.7x busy, now 11.6x, simulated), (2) the profile read
# beside the GPU's background opening, (3) the placement kept from --device auto's prediction.
# The search's wall time, old and new round shape, same seeds and work; the trail (-v) of cold
# --device auto runs; the auto vs cpu table; pedigree50; GPU kernel test and --check.
# Bundle: bench/e2e/bundle.sh build .dev-e2e4 ../shared/data/uai
. "$(dirname "$0")/lib.sh"
e2e_begin e2e4
for n in linkage_11:1.06 linkage_12:0.6 linkage_13:0.6 linkage_17:0.6 linkage_14:0.6; do
  net=${n%%:*}; b=${n##*:}
  for shape in "16 4 12" "32 12 8"; do
    set -- $shape
    for s in 1 2 3 4; do
      $B/run bench/order/order_bench $D/$net.uai --budget $b --fraction 1e9 --seed $s \
        --round-restarts $1 --round-chains $2 --round-moves $3
    done
  done
done > $R/order.jsonl 2> $R/order.err
e2e_cold3 linkage_11 linkage_17 linkage_13 linkage_12 linkage_14 linkage_18
e2e_tables linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11
e2e_gpu_kernel_test
e2e_check linkage_13 linkage_11
e2e_end 8
