#!/bin/bash
# Twelfth session (split3): KINFER_GPU_SPLIT_TERMS=1024 against the default 256 in pe's own
# plans (timelines, three rounds alternating): the GPU busy time of linkage_11/12/13/17/18 and
# pedigree50 (60G), their few-output large-sum buckets included.
# Bundle: bench/e2e/bundle.sh build .dev-split SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin split3
e2e_timelines_ab 3 s256 s1024 KINFER_GPU_SPLIT_TERMS=1024 linkage_17 linkage_13 linkage_12 linkage_11 linkage_18 pedigree50
for n in linkage_17 linkage_13 linkage_12 linkage_11 linkage_18 pedigree50; do
  for c in s256 s1024; do
    echo "$n $c: $(for i in 0 1 2; do python3 $B/timeline.py $R/$n-$c-$i.tsv --gap 5 2>/dev/null | head -1 | grep -o 'GPU busy [0-9.]* ms'; done | tr '\n' ' ')"
  done
done
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
