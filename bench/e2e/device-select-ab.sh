#!/bin/bash
# Fifth session, call 11: the closing table (call 10) had linkage_17's compute at 0.135-0.137 s
# against 0.085-0.092 before the selector's one- and two-lane rules. Warm runs (one cached order
# per network) under KINFER_GPU_SELECT=BYTES:REUSE: 1:2 (main), 2:0 (before both rules), 2:2
# (two-lane rule only), 1:0 (one-lane threshold only), two rounds; then linkage_17's buckets in
# pe's order (schedule-compare --order-time 0.95, as device-buckets.sh) under 1:2 and 2:0.
# Bundle: bench/e2e/bundle.sh build .dev-selab SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin selab
for i in 1 2; do
  for cfg in 1:2 2:0 2:2 1:0; do
    KINFER_GPU_SELECT=$cfg M --warm --out $R/warm-${cfg/:/-}-$i.tsv --devices auto --timeout 30 --deadline 60 \
      linkage_17 linkage_13 linkage_11
  done
done
for f in $R/warm-*.tsv; do echo "$(basename $f) $(cut -f1,3,5 $f | tail -n +2 | tr '\t\n' '  ')"; done
for cfg in 1:2 2:0; do
  KINFER_GPU_SELECT=$cfg timeout 100 $k schedule-compare $D/linkage_17.uai --seed 1 --order-time 0.95 \
    --order-cache none --repeat 1 --profile $B/data/profiles/h100.json \
    --bucket-log $R/buckets-${cfg/:/-}.tsv > $R/schedule-${cfg/:/-}.log 2>&1
  echo "schedule-compare $cfg rc=$?"
done
python3 - $R/buckets-1-2.tsv $R/buckets-2-0.tsv <<'PY'
import csv, sys
a = {r["bucket"]: r for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")}
b = {r["bucket"]: r for r in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
tot = [0, 0]
rows = []
for k in a:
    if k not in b: continue
    x, y = float(a[k]["gpu_measured"]), float(b[k]["gpu_measured"])
    tot[0] += x; tot[1] += y
    rows.append((x - y, k, x, y, a[k]["log2_states"], a[k]["log2_marg"]))
print("summed GPU ms: 1:2 %.2f, 2:0 %.2f" % (1e3 * tot[0], 1e3 * tot[1]))
for d, k, x, y, st, mg in sorted(rows, key=lambda r: -abs(r[0]))[:8]:
    print("bucket %s states 2^%s marg 2^%s: 1:2 %.3f ms, 2:0 %.3f ms" % (k, st, mg, 1e3 * x, 1e3 * y))
PY
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
