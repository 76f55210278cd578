#!/bin/bash
set -u
B=.dev-final; R=$OUT/final5; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles
k="$B/run apps/kinfer"
python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" --out "$R/after.tsv" --devices auto \
  --timeout 30 --deadline 90 linkage_14 linkage_21 linkage_11 linkage_12 linkage_13 linkage_17
python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" --out "$R/pedigree50.tsv" --devices auto \
  --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
rm -rf $R/cache; tar -C $OUT -czf $OUT/final5.tgz final5 && rm -rf $R
