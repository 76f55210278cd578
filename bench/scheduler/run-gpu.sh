#!/bin/bash
# The scheduler's measurements on the GPU machine, in one go (nothing is built there):
#   1. kinfer calibrate: the CPU and GPU kernel sweeps and host<->GPU transfers -> profile.json
#   2. kinfer schedule-compare on the shared linkage instances with that profile: every policy
#      predicted and measured, each bucket's kernel timed alone on both devices (bucket logs).
# Run from the repository root:  BUNDLE=.device-bundle-s bench/scheduler/run-gpu.sh OUTDIR
# The bundle holds apps/kinfer (a release build with -Dcuda=enabled), its libraries and, under
# data/, the linkage instances the repository does not carry. Results: OUTDIR/sched/*.
set -u
out=${1:?usage: run-gpu.sh OUTDIR}
bundle=${BUNDLE:-.device-bundle-s}
r=$out/sched
mkdir -p "$r"
kinfer() { "$bundle/run" apps/kinfer "$@"; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; } > "$r/machine.txt" 2>&1
start=$(date +%s)
kinfer calibrate --seconds "${CAL_SECONDS:-100}" -o "$r/profile.json" > "$r/calibrate.txt" 2>&1
echo "calibrate rc=$? $(( $(date +%s) - start )) s" >> "$r/status.txt"
# cheap instances first, so that a time limit cuts the expensive ones
for spec in 24:2 16:2 21:2 14:2 18:2 13:1; do
  n=${spec%%:*} repeat=${spec##*:}
  f=data/uai/linkage_$n.uai.gz
  [ -f "$f" ] || f=$bundle/data/linkage_$n.uai
  t0=$(date +%s)
  timeout "${LIMIT:-150}" "$bundle/run" apps/kinfer schedule-compare "$f" --profile "$r/profile.json" \
    --repeat "$repeat" --json --bucket-log "$r/linkage_$n.buckets.tsv" \
    --save-tree "$r/linkage_$n.tree.json" > "$r/linkage_$n.json" 2> "$r/linkage_$n.log"
  echo "linkage_$n rc=$? $(( $(date +%s) - t0 )) s" >> "$r/status.txt"
done
# A second profile whose sweep also holds buckets of four of the networks, checked on the two
# networks it has not seen: how much calibrating on one's own kind of network helps.
if [ "${NET_CAL:-1}" = 1 ]; then
  kinfer calibrate --seconds "${NET_CAL_SECONDS:-60}" -o "$r/profile-net.json" \
    --network data/uai/linkage_14.uai.gz --network data/uai/linkage_16.uai.gz \
    --network data/uai/linkage_21.uai.gz --network data/uai/linkage_24.uai.gz > "$r/calibrate-net.txt" 2>&1
  for n in 18 13; do
    timeout "${LIMIT:-150}" "$bundle/run" apps/kinfer schedule-compare "$bundle/data/linkage_$n.uai" \
      --profile "$r/profile-net.json" --repeat 1 --json --bucket-log "$r/linkage_$n.net.buckets.tsv" \
      > "$r/linkage_$n.net.json" 2> "$r/linkage_$n.net.log"
    echo "linkage_$n (profile-net) rc=$?" >> "$r/status.txt"
  done
fi
# the human-readable table once, for the record
"$bundle/run" apps/kinfer schedule-compare data/uai/linkage_14.uai.gz --profile "$r/profile.json" \
  --repeat 2 > "$r/linkage_14.txt" 2>&1
tar czf "$out/sched-results.tgz" -C "$out" sched
cat "$r/status.txt" "$r/calibrate.txt" "$r/calibrate-net.txt" "$r/linkage_14.txt" 2>/dev/null
