#!/bin/bash
# Issue 12, end to end, after the search's GPU floor went from 4 to 3 device starts: the trail
# (-v) of cold --device auto runs (three each), the auto vs cpu table and pedigree50.
# Bundle: bench/e2e/bundle.sh -> .dev-e2e.
set -u
B=${B:-.dev-e2e}; R=$OUT/e2e3; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles
k="$B/run apps/kinfer"; D=$B/data/uai
t="python3 $B/trail.py --kinfer \"$k\" --out $R/trail"
for n in linkage_17 linkage_13 linkage_11 linkage_12 linkage_14 linkage_18; do
  eval $t "$n-cold1=\"pe $D/$n.uai --json --order-cache none\"" "$n-cold2=\"pe $D/$n.uai --json --order-cache none\"" \
          "$n-cold3=\"pe $D/$n.uai --json --order-cache none\""
done
M() { python3 "$B/measure.py" --kinfer "$k" --data "$D" "$@"; }
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 150 \
  linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
rm -rf $R/cache; tar -C $OUT -czf $OUT/e2e3.tgz e2e3 && rm -rf $R
