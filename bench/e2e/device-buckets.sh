#!/bin/bash
# Issue 12: where the GPU time of the default GPU-sized orders goes. `pe --device auto` (seed 1)
# stops its GPU-sized search at work 1.547 (linkage_11) and 0.956 (linkage_17) nominal core-s
# (device-search-open, seed1 rows); a CPU-sized search with that budget stops at the same round
# and returns the same order, so schedule-compare --order-time just below it times the default
# order's buckets one by one (--bucket-log: each GPU bucket synchronized and timed).
# Bundle: bench/e2e/bundle.sh build .dev-buckets SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin buckets
for spec in linkage_11:1.54 linkage_17:0.95; do
  n=${spec%:*} b=${spec#*:}
  $k pe $D/$n.uai --json --order-cache none > $R/$n-pe.json 2> $R/$n-pe.err
  timeout 200 $k schedule-compare $D/$n.uai --seed 1 --order-time $b --order-cache none --repeat 1 \
    --profile $B/data/profiles/h100.json --bucket-log $R/$n-buckets.tsv > $R/$n-schedule.log 2>&1
  python3 - $R/$n-pe.json $R/$n-schedule.log <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1])); o = j["order"]
print(sys.argv[1], "pe order 2^%.3f width %d compute %.4f" % (o["log2_total_state"], o["width"], j["timings"]["compute"]))
for l in open(sys.argv[2]):
    if "total state" in l or "order" in l[:40] or "comm-aware" in l: print("  ", l.rstrip()[:200])
PY
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
