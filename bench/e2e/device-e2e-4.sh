#!/bin/bash
# Issue 12, end to end, after (1) the order search's rounds of 32 restarts + 12 chains of 8 moves
# (were 16 + 4 of 12: the threads were 6.7x busy, now 11.6x, simulated), (2) the profile read
# beside the GPU's background opening, (3) the placement kept from --device auto's prediction.
# The search's wall time, old and new round shape, same seeds and work; the trail (-v) of cold
# --device auto runs; the auto vs cpu table; pedigree50; GPU kernel test and --check.
# Bundle: bench/e2e/bundle.sh build .dev-e2e4 ../shared/data/uai
set -u
B=${B:-.dev-e2e4}; R=$OUT/e2e4; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
k="$B/run apps/kinfer"; D=$B/data/uai
nproc > $R/machine.txt; nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv >> $R/machine.txt
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
t="python3 $B/trail.py --kinfer \"$k\" --out $R/trail"
for n in linkage_11 linkage_17 linkage_13 linkage_12 linkage_14 linkage_18; do
  eval $t "$n-cold1=\"pe $D/$n.uai --json --order-cache none\"" "$n-cold2=\"pe $D/$n.uai --json --order-cache none\"" \
          "$n-cold3=\"pe $D/$n.uai --json --order-cache none\""
done
M() { python3 "$B/measure.py" --kinfer "$k" --data "$D" "$@"; }
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 150 \
  linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
( cd $B && KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel.txt
for n in linkage_13 linkage_11; do timeout 60 $k pe $D/$n.uai --check > $R/check-$n.txt 2>&1; echo "exit $?" >> $R/check-$n.txt; done
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
cut -f1-8 $R/after.tsv
rm -rf $R/cache; tar -C $OUT -czf $OUT/e2e4.tgz e2e4 && rm -rf $R
