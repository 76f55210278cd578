#!/bin/bash
# Plan time on the GPU machine (or here): `kinfer pe NET -v --json --order-cache none` per
# network and device, one process each; the -v log holds the plan's steps (reduction, order
# search, task tree, inputs) and the JSON the read/plan/compute split. Writes OUT/plan-time.tsv
# and OUT/plan-time.log.
# usage: plan-time.sh KINFER_CMD DATA_DIR OUT DEVICES NETWORK...
set -u
kinfer=$1 data=$2 out=$3 devices=$4; shift 4
tsv=$out/plan-time.tsv log=$out/plan-time.log
[ -f "$tsv" ] || printf 'network\tdevice\twall_s\tread_s\tplan_s\tcompute_s\tdevice_start_s\torder_s\twork\trestarts\tstopped_by\tlog2_total\tused\n' > "$tsv"
for net in "$@"; do
  f=$data/$net.uai; [ -f "$f" ] || f=$f.gz
  for dev in ${devices//,/ }; do
    t0=$(date +%s.%N)
    $kinfer pe "$f" --json -v --device "$dev" --max-memory 100G --order-cache none > "$out/j.json" 2> "$out/e.log"
    rc=$?
    t1=$(date +%s.%N)
    { echo "== $net $dev rc=$rc"; grep -E "plan:|order |GPU|profile|auto|schedule|calibrat" "$out/e.log"; } >> "$log"
    python3 - "$net" "$dev" "$t0" "$t1" "$out/j.json" >> "$tsv" <<'PY'
import json, sys
net, dev, t0, t1, path = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception as e:
    print(f"{net}\t{dev}\tERROR {e}"); sys.exit()
t = j.get("timings", {}); o = j.get("order", {})
print(f"{net}\t{dev}\t{float(t1)-float(t0):.3f}\t{t.get('read',0):.3f}\t{t.get('plan',0):.3f}\t"
      f"{t.get('compute',0):.3f}\t{t.get('device_start',0):.3f}\t{o.get('seconds',0):.3f}\t"
      f"{o.get('work',0):.3g}\t{o.get('restarts',0)}\t{o.get('stopped_by','')}\t"
      f"{o.get('log2_total_state',0):.2f}\t{j.get('device')}")
PY
  done
done
rm -f "$out/j.json" "$out/e.log"
