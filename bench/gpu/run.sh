#!/usr/bin/env bash
# Everything the GPU machine does in one call (it keeps nothing between calls): the GPU tests,
# the device's ceilings, the per-bucket benchmark on random buckets and on the linkage
# networks, and kinfer end to end on the CPU (16 threads) and on the GPU. Results land in OUT as
# one tarball plus a short summary (the device tool brings back few files).
#
# usage, from the repository root on the GPU machine, after bundle-for-device:
#   bench/gpu/run.sh BUNDLE OUT [quick|full|tests|bench|e2e|heavy]
# heavy: the large linkage networks end to end (minutes of CPU), their big buckets, the
# profiler on two kernels and the race checker on the cached kernel.
set -uo pipefail
B=$(cd "$1" && pwd)
OUT=$2
MODE=${3:-full}
W=$(mktemp -d)
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KINFER_DATA="$B/data"
THREADS=16
DEADLINE=${DEADLINE:-540}  # seconds this script may take in all (the device call's limit is 600)
# t N: a timeout of N seconds, cut to what is left of the deadline (keeping 20 s to pack up)
t() { local left=$((DEADLINE - SECONDS - 20)); ((left < 5)) && left=5; echo $(($1 < left ? $1 : left)); }
over() { ((DEADLINE - SECONDS - 20 < 10)); }
log() { echo "[$(date +%T)] $*" | tee -a "$W/summary.txt"; }
# One TSV row from a `kinfer pe --json` result: NAME, device, seconds, compute, plan, device start,
# log10 P(e), buckets on the GPU and on the CPU (or NAME, DEV, ERROR ...).
e2e_row() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{sys.argv[2]}\t{sys.argv[3]}\tERROR {e}"); sys.exit()
g = j.get("gpu", {})
t = j["timings"]
print(f"{sys.argv[2]}\t{j['device']}\t{j['seconds']:.4f}\t{t['compute']:.4f}\t{t['plan']:.4f}\t"
      f"{t.get('device_start', 0):.4f}\t{j['log10_pr']}\t{g.get('buckets_gpu', 0)}\t{g.get('buckets_cpu', 0)}")
PY
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used \
  --format=csv > "$W/gpu_state.txt" 2>&1
log "device: $(tail -1 "$W/gpu_state.txt"); $(nproc) CPU cores"

if [[ $MODE == quick || $MODE == full || $MODE == tests ]]; then
  timeout $(t 120) "$B/tests/test_gpu_policy" > "$W/test_gpu_policy.log" 2>&1
  log "test_gpu_policy rc=$? $(tail -1 "$W/test_gpu_policy.log")"
  # memory checker on a small slice of the random buckets
  KINFER_GPU_TEST_SCALE=0.01 timeout $(t 150) compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/tests/test_gpu_kernel" "GpuKernel.RandomBucketsMatchCpu" > "$W/sanitizer.log" 2>&1
  log "compute-sanitizer memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$W/sanitizer.log" | tail -1)"
  SCALE=1; [[ $MODE == quick ]] && SCALE=0.3
  KINFER_GPU_TEST_SCALE=$SCALE timeout $(t 400) "$B/tests/test_gpu_kernel" > "$W/test_gpu_kernel.log" 2>&1
  log "test_gpu_kernel rc=$? $(grep -E 'test cases|passed|failed' "$W/test_gpu_kernel.log" | tail -1)"
  grep -E "random buckets|large-sum|buckets, largest" "$W/test_gpu_kernel.log" | tee -a "$W/summary.txt"
fi

if [[ $MODE == quick || $MODE == full || $MODE == bench ]]; then
  timeout $(t 60) "$B/bench/gpu/bucket_bench" --ceilings --out "$W/ceilings.tsv" > "$W/ceilings.log" 2>&1
  log "ceilings rc=$?"; cat "$W/ceilings.log" | tee -a "$W/summary.txt"
  NRAND=240; [[ $MODE == quick ]] && NRAND=120
  timeout $(t 300) "$B/bench/gpu/bucket_bench" --random $NRAND --min-log2 10 --max-log2 28 \
    --threads $THREADS --out "$W/random.tsv" > "$W/random.log" 2>&1
  log "random buckets rc=$? ($(($(wc -l < "$W/random.tsv") - 1)) rows)"
fi

if [[ $MODE == quick || $MODE == full || $MODE == e2e ]]; then
  # End to end: the order is searched once (cached in $W/orders) so the CPU and GPU runs
  # compute the same plan; each is the median of 3 runs.
  echo -e "network\tdevice\tseconds\tcompute\tplan\tdevice_start\tlog10_pr\tgpu_buckets\tcpu_buckets" > "$W/e2e.tsv"
  for n in linkage_14 linkage_16 linkage_18 linkage_21 linkage_24 Pedigree_11 Promedus_24 CSP_12; do
    over && break
    f="$B/data/uai/$n.uai"; [[ -f $f ]] || f="$f.gz"
    [[ -f $f ]] || continue
    timeout $(t 120) "$B/apps/kinfer" pe "$f" --threads $THREADS --order-cache "$W/orders" --device cpu -q > /dev/null 2>&1
    for dev in cpu gpu; do
      for r in 1 2 3; do
        timeout $(t 120) "$B/apps/kinfer" pe "$f" --threads $THREADS --order-cache "$W/orders" \
          --device $dev --json -q > "$W/e2e_${n}_${dev}_$r.json" 2>> "$W/e2e.err"
        e2e_row "$W/e2e_${n}_${dev}_$r.json" "$n" "$dev" >> "$W/e2e.tsv"
      done
    done
    log "e2e $n: $(grep -P "^$n\t" "$W/e2e.tsv" | awk -F'\t' '{printf "%s %ss(%s) ", $2, $3, $4}')"
  done
  f="$B/data/uai/linkage_14.uai"; [[ -f $f ]] || f="$f.gz"
  over || timeout $(t 120) "$B/apps/kinfer" pe "$f" --threads $THREADS \
    --order-cache "$W/orders" --check --json -q > "$W/check_linkage_14.json" 2> "$W/check.err"
  log "check linkage_14: $(python3 -c "import json;print(json.load(open('$W/check_linkage_14.json')).get('check'))" 2>&1)"
fi

if [[ $MODE == quick || $MODE == full || $MODE == bench ]]; then
  for n in linkage_14 linkage_16 linkage_18 linkage_21 linkage_24; do
    over && break
    f="$B/data/uai/$n.uai"; [[ -f $f ]] || f="$f.gz"
    timeout $(t 200) "$B/bench/gpu/bucket_bench" --network "$f" --min-log2 14 --threads $THREADS \
      --out "$W/net_$n.tsv" > "$W/net_$n.log" 2>&1
    log "buckets of $n rc=$? ($(($(wc -l < "$W/net_$n.tsv") - 1)) rows)"
  done
fi

if [[ $MODE == heavy ]]; then
  # race checker on the software cache's barriers (small buckets)
  KINFER_GPU_TEST_SCALE=0.004 timeout $(t 120) compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$B/tests/test_gpu_kernel" "GpuKernel.RandomBucketsMatchCpu" > "$W/racecheck.log" 2>&1
  log "compute-sanitizer racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$W/racecheck.log" | tail -1)"
  # profiler: the root bucket of linkage_18 (plain, split) and a cached bucket of linkage_14
  NCU="ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis -c 1"
  timeout $(t 120) $NCU -k regex:plain3_kernel "$B/bench/gpu/bucket_bench" --network "$B/data/uai/linkage_18.uai" \
    --min-log2 27.5 --repeats 1 --threads $THREADS --out "$W/ncu_plain.tsv" > "$W/ncu_plain.txt" 2>&1
  log "ncu plain rc=$?"
  timeout $(t 120) $NCU -k regex:cached_kernel "$B/bench/gpu/bucket_bench" --network "$B/data/uai/linkage_14.uai" \
    --min-log2 25 --repeats 1 --threads $THREADS --out "$W/ncu_cached.tsv" > "$W/ncu_cached.txt" 2>&1
  log "ncu cached rc=$?"
  echo -e "network\tdevice\tseconds\tcompute\tplan\tdevice_start\tlog10_pr\tgpu_buckets\tcpu_buckets" > "$W/e2e_heavy.tsv"
  for n in linkage_13 linkage_17 linkage_12 linkage_11; do
    over && break
    f="$B/data/uai/$n.uai"
    timeout $(t 60) "$B/apps/kinfer" info "$f" --threads $THREADS --order-cache "$W/orders" -q > "$W/info_$n.txt" 2>&1
    for dev in gpu cpu; do
      reps=3; [[ $dev == cpu ]] && reps=2
      for r in $(seq $reps); do
        over && break
        timeout $(t 150) "$B/apps/kinfer" pe "$f" --threads $THREADS --order-cache "$W/orders" \
          --device $dev --json -q > "$W/e2e_${n}_${dev}_$r.json" 2>> "$W/e2e.err"
        e2e_row "$W/e2e_${n}_${dev}_$r.json" "$n" "$dev" >> "$W/e2e_heavy.tsv"
      done
    done
    log "e2e $n: $(grep -P "^$n\t" "$W/e2e_heavy.tsv" | awk -F'\t' '{printf "%s %ss(%s) %s; ", $2, $3, $4, $7}')"
  done
  for n in linkage_13 linkage_17; do
    over && break
    timeout $(t 150) "$B/bench/gpu/bucket_bench" --network "$B/data/uai/$n.uai" --min-log2 26 \
      --threads $THREADS --out "$W/net_$n.tsv" > "$W/net_$n.log" 2>&1
    log "buckets of $n rc=$? ($(($(wc -l < "$W/net_$n.tsv") - 1)) rows)"
  done
fi

tar -C "$W" -czf "$OUT/results.tar.gz" .
cp "$W/summary.txt" "$OUT/summary.txt"
echo "done: $(du -sh "$OUT/results.tar.gz" | cut -f1)"
