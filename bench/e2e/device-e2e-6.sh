#!/bin/bash
# Issue 12, end to end, after call 5 (device-e2e-5.sh): without --seed the search goes on while the
# device is still starting (OrderOptions::keep_searching); the GPU-sized floor 2 starts (0.6 core-s)
# at 6 core-s per second; also seeded runs (--seed 1: work-based only) of linkage_11 and 17.
# Bundle: bench/e2e/bundle.sh build .dev-e2e6 ../shared/data/uai
set -u
B=${B:-.dev-e2e6}; R=$OUT/e2e6; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
k="$B/run apps/kinfer"; D=$B/data/uai
nproc > $R/machine.txt; nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv >> $R/machine.txt
t="python3 $B/trail.py --kinfer \"$k\" --out $R/trail"
for n in linkage_11 linkage_17 linkage_13 linkage_12 linkage_14 linkage_18 linkage_21; do
  eval $t "$n-cold1=\"pe $D/$n.uai --json --order-cache none\"" "$n-cold2=\"pe $D/$n.uai --json --order-cache none\"" \
          "$n-cold3=\"pe $D/$n.uai --json --order-cache none\""
done
for n in linkage_11 linkage_17; do
  eval $t "$n-seed1=\"pe $D/$n.uai --json --order-cache none --seed 1\"" "$n-seed1b=\"pe $D/$n.uai --json --order-cache none --seed 1\""
done
M() { python3 "$B/measure.py" --kinfer "$k" --data "$D" "$@"; }
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 150 \
  linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11 Pedigree_13 pedigree1
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
for n in linkage_17 linkage_12; do timeout 60 $k pe $D/$n.uai --check > $R/check-$n.txt 2>&1; echo "exit $?" >> $R/check-$n.txt; done
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
cut -f1-5 $R/after.tsv; cut -f1-5 $R/pedigree50.tsv | tail -1
rm -rf $R/cache; tar -C $OUT -czf $OUT/e2e6.tgz e2e6 && rm -rf $R
