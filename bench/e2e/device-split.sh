#!/bin/bash
# Twelfth session: the plain kernel's split of a large summed range (DeviceLimits::
# split_min_terms, KINFER_GPU_SPLIT_TERMS): each lane keeps at least 256 terms by default, which
# leaves linkage_17's one-output bucket 554 (113 M terms) 864 blocks, under one wave of the
# H100's resident threads. bucket_bench of linkage_17's (>= 2^26 states) and linkage_13's
# (>= 2^28) buckets, as run (--merge), under 256 (default), 128, 64 and 32 terms, in one
# process each; each config's roofline census.
# Bundle: bench/e2e/bundle.sh build .dev-split SHARED_UAI (bench/gpu kept)
# SPLIT_NAME, SPLIT_TERMS (the terms a lane tried besides the default) and SPLIT_L13 (linkage_13's
# smallest log2 states) give the second call (device-split2.sh).
. "$(dirname "$0")/lib.sh"
e2e_begin ${SPLIT_NAME:-split}
terms=${SPLIT_TERMS:-128 64 32}
configs="--config base"
for t in $terms; do configs="$configs --config s$t:KINFER_GPU_SPLIT_TERMS=$t"; done
for n in linkage_17:26 linkage_13:${SPLIT_L13:-28}; do
  timeout 200 $B/run bench/gpu/bucket_bench --network $D/${n%%:*}.uai --min-log2 ${n#*:} --merge \
    $configs --threads 16 --repeats 5 --cpu-runs 1 --no-f32 --out $R/${n%%:*}.tsv > $R/${n%%:*}.log 2>&1
  echo "${n%%:*} rc=$?"
done
for c in base $(for t in $terms; do echo s$t; done); do
  echo "== $c"; python3 $B/roofline_census.py $R/${c}_*.tsv 2>&1 | tail -25
done
for f in $R/*_linkage_*.tsv; do echo "== $f"; cut -f1-4,8,15,20 $f | awk -F'\t' '$3 <= 4096 || NR == 1'; done
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
