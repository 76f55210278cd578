#!/bin/bash
# second call: the --device auto rows after the fix (unfilled plans no longer reach plan_costs)
set -u
B=.dev-final; R=$OUT/final2; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
k="$B/run apps/kinfer"
M() { python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" "$@"; }
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 150 \
  linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 DBN_11 linkage_21
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
timeout 60 $k lod --help > /dev/null
rm -rf $R/cache; tar -C $OUT -czf $OUT/final2.tgz final2 && rm -rf $R
