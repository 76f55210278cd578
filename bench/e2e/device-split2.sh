#!/bin/bash
# Twelfth session (split2: 512, 1024 and 4096 terms after 128-32 lost): the plain kernel's split of a large summed range (DeviceLimits::
# split_min_terms, KINFER_GPU_SPLIT_TERMS): each lane keeps at least 256 terms by default, which
# leaves linkage_17's one-output bucket 554 (113 M terms) 864 blocks, under one wave of the
# H100's resident threads. bucket_bench of linkage_17's (>= 2^26 states) and linkage_13's
# (>= 2^28) buckets, as run (--merge), under 256 (default), 128, 64 and 32 terms, in one
# process each; each config's roofline census.
# Bundle: bench/e2e/bundle.sh build .dev-split SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin split2
for n in linkage_17:26 linkage_13:29; do
  timeout 200 $B/run bench/gpu/bucket_bench --network $D/${n%%:*}.uai --min-log2 ${n#*:} --merge \
    --config base --config s512:KINFER_GPU_SPLIT_TERMS=512 --config s1024:KINFER_GPU_SPLIT_TERMS=1024 \
    --config s4096:KINFER_GPU_SPLIT_TERMS=4096 \
    --threads 16 --repeats 5 --cpu-runs 1 --no-f32 --out $R/${n%%:*}.tsv > $R/${n%%:*}.log 2>&1
  echo "${n%%:*} rc=$?"
done
for c in base s512 s1024 s4096; do
  echo "== $c"; python3 $B/roofline_census.py $R/${c}_*.tsv 2>&1 | tail -25
done
for f in $R/*_linkage_*.tsv; do echo "== $f"; cut -f1-4,8,15,20 $f | awk -F'\t' '$3 <= 4096 || NR == 1'; done
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
