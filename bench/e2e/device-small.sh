#!/bin/bash
set -u
B=.dev-final; R=$OUT/small; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles
k="$B/run apps/kinfer"; D=$B/data/uai
t="python3 $B/trail.py --kinfer \"$k\" --out $R"
for i in 1 2 3 4 5; do
  eval $t "p1-auto-$i=\"pe $D/pedigree1.uai --json --order-cache none\"" "p1-cpu-$i=\"pe $D/pedigree1.uai --json --order-cache none --device cpu\"" \
    "p13-auto-$i=\"pe $D/Pedigree_13.uai --json --order-cache none\"" "p13-cpu-$i=\"pe $D/Pedigree_13.uai --json --order-cache none --device cpu\""
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/small.tgz small && rm -rf $R
