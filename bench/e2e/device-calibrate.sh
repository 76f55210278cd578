#!/bin/bash
# Device call 1 of the plan-time work (run in the repository root of the GPU machine, bundle in
# B=.dev-plan holding the build, data/uai with the shared networks and REFERENCES.tsv, and these
# scripts): `kinfer calibrate` (the shipped profile data/profiles/h100.json), then the plan time
# baseline with bench/e2e/plan-time.sh. Everything under $OUT, tarred.
set -u
B=${B:-.dev-plan}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/c1"
k="$B/run apps/kinfer"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/c1/gpu.txt" 2>&1
nproc >> "$OUT/c1/gpu.txt"
export XDG_CACHE_HOME=$OUT/c1/cache
SECONDS_CAL=${SECONDS_CAL:-40}
if [ "${SKIP_CAL:-0}" != 1 ]; then
  /usr/bin/time -v $k calibrate --seconds "$SECONDS_CAL" -o "$OUT/c1/h100.json" > "$OUT/c1/calibrate.txt" 2> "$OUT/c1/calibrate.log"
  echo "calibrate rc=$?" >> "$OUT/c1/calibrate.txt"
fi
# the new profile is found by the GPU's name (as data/profiles/h100.json will be)
mkdir -p "$OUT/c1/shipped"
[ -f "$OUT/c1/h100.json" ] && cp "$OUT/c1/h100.json" "$OUT/c1/shipped/"
export KINFER_PROFILES=$OUT/c1/shipped
bash "$B/plan-time.sh" "$k" "$B/data/uai" "$OUT/c1" cpu,auto \
  linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 Pedigree_11 pedigree1 linkage_16
# the search's parallel efficiency: the same counted work (2 nominal core-seconds) on 1 and 16
# threads (`info` plans only), for rounds of 4 chains x 12 moves (the search now) and of
# 16 x 3 and 8 x 6 (KINFER_ORDER_CHAINS: a switch of that build only, removed since; the
# rounds stay 4 x 12, docs/perf-notes.md)
for net in linkage_11; do
  for ch in 4,12 8,6 16,3; do
    for t in 1 16; do
      KINFER_ORDER_CHAINS=$ch /usr/bin/time -f "$net chains=$ch threads=$t wall=%e user=%U sys=%S" \
        $k info "$B/data/uai/$net.uai" --json --order-time 2 --order-cache none --threads $t \
        > "$OUT/c1/info-$net-$ch-$t.json" 2>> "$OUT/c1/efficiency.txt"
    done
  done
done
# a GPU no profile knows: the automatic calibration (10 s, cached), then a run that reuses it
mkdir -p "$OUT/c1/auto" "$OUT/c1/none"
KINFER_PROFILES=$OUT/c1/none XDG_CACHE_HOME=$OUT/c1/auto/cache \
  bash "$B/plan-time.sh" "$k" "$B/data/uai" "$OUT/c1/auto" auto linkage_12 linkage_12
ls -R "$OUT/c1/auto/cache" > "$OUT/c1/auto/cache.txt" 2>&1
tar -C "$OUT" -czf "$OUT/c1.tgz" c1 && rm -rf "$OUT/c1"
