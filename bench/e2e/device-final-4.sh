#!/bin/bash
set -u
B=.dev-final; R=$OUT/diag; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
k="$B/run apps/kinfer"
for s in whole-plan gpu-only comm-aware; do
  python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" --out "$R/$s.tsv" --devices gpu \
    --timeout 30 --deadline 60 --extra "--max-memory 100G --schedule $s" linkage_17 linkage_13 linkage_14
done
/usr/bin/time -v $k pe $B/data/uai/Pedigree_11.uai --device gpu -q > $R/p11-gpu.txt 2>&1
rm -rf $R/cache; tar -C $OUT -czf $OUT/diag.tgz diag && rm -rf $R
