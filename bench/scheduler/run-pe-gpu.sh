#!/bin/bash
# `kinfer pe` on the GPU machine, side by side (nothing is built there):
#   1. every network under each GPU placement: whole-plan and the other scheduler
#      policies gpu-only, greedy, comm-aware (profile PROFILE); each its own process with the
#      same order (--order-cache), first run and median of --repeat runs after it
#   2. where transfers matter: schedule-compare on networks with large intermediate tables
#      (Grids_11, and a helix network from make-band.py, written into the bundle beforehand)
#   3. --check and the default path once, so that they are known to work on the device
# Run from the repository root:  BUNDLE=.device-bundle-s bench/scheduler/run-pe-gpu.sh OUTDIR PROFILE
# (PE_NETS, PE_SCHEDULES, REPEAT, TRANSFER_FILES, TRANSFER_REPEAT, LIMIT narrow or widen it)
set -u
out=${1:?usage: run-pe-gpu.sh OUTDIR PROFILE}
prof=${2:?usage: run-pe-gpu.sh OUTDIR PROFILE}
bundle=${BUNDLE:-.device-bundle-s}
r=$out/pe
mkdir -p "$r" "$out/orders"
kinfer() { "$bundle/run" apps/kinfer "$@"; }
net() { local f=data/uai/$1.uai.gz; [ -f "$f" ] || f=data/uai/$1.uai; [ -f "$f" ] || f=$bundle/data/$1.uai; echo "$f"; }
for n in ${PE_NETS:-24 16 21 14 18 13 12 17 11}; do
  f=$(net linkage_$n)
  for s in ${PE_SCHEDULES:-whole-plan gpu-only greedy comm-aware}; do
    t0=$EPOCHREALTIME
    timeout "${LIMIT:-120}" "$bundle/run" apps/kinfer pe "$f" --device gpu --schedule "$s" \
      --profile "$prof" --repeat "${REPEAT:-3}" --order-cache "$out/orders" --json \
      > "$r/linkage_$n.$s.json" 2> "$r/linkage_$n.$s.log"
    rc=$?; echo "linkage_$n $s rc=$rc $(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $t0}") s" >> "$r/status.txt"
  done
done
# where transfers matter
s=$out/transfers
mkdir -p "$s"
for f in ${TRANSFER_FILES:-data/uai/Grids_11.uai $bundle/data/helix-600-2-18.uai $bundle/data/helix-300-2-14.uai}; do
  b=$(basename "$f" .uai)
  timeout "${LIMIT:-120}" "$bundle/run" apps/kinfer schedule-compare "$f" --profile "$prof" \
    --repeat "${TRANSFER_REPEAT:-5}" --json --explain --bucket-log "$s/$b.buckets.tsv" --save-tree "$s/$b.tree.json" \
    > "$s/$b.json" 2> "$s/$b.log"
  echo "$b rc=$?" >> "$s/status.txt"
done
# --check and the default path (no --schedule, no profile: the fallback) once each
kinfer pe "$(net linkage_16)" --device gpu --check --json > "$r/check.json" 2> "$r/check.log"
echo "check rc=$?" >> "$r/status.txt"
XDG_CACHE_HOME=$out/empty-cache kinfer pe "$(net linkage_16)" --device gpu --json --explain \
  > "$r/default-noprofile.json" 2> "$r/default-noprofile.log"
echo "default without a profile rc=$?" >> "$r/status.txt"
python3 bench/scheduler/summarize-pe.py "$r" > "$r/summary.md" 2>&1
cat "$r/status.txt" "$s/status.txt" "$r/summary.md"
