#!/usr/bin/env bash
# Kernel before/after in one GPU-machine call: the GPU tests of the new build, then the
# per-bucket benchmark of two builds side by side on the same buckets (random buckets from one
# seed; network buckets from one cached order, shared through KINFER_ORDER_CACHE), then a
# before/after table of the roofline fraction per bucket (bench/gpu/compare.py), then the
# memory checker on the new build.
#
# usage (on the GPU machine): bench/gpu/kernel_compare.sh DIR OUT
#   DIR holds main/ and new/ (bundle-for-device of each build), data/uai/, compare.py
# environment (all optional):
#   BENCHES      "NAME:ARGS ..." bucket_bench runs (ARGS with commas for spaces; default: the
#                linkage_13/17/18/14 networks and 24 random buckets); $D in ARGS is DIR
#   NEW_CONFIGS  "NAME[:VAR=VAL,...] ..." configurations of the new build timed in the same
#                process (bucket_bench --config; default "new": its defaults). Each writes
#                NAME_*.tsv; compare.py DIR --before main --after NAME
#   TEST_SCALE (0.2), TEST_TIME (240 s), SKIP_LARGE (0: run the 2^31-output case), DEADLINE (570 s),
#   MEMCHECK_TESTS (Catch2 case list), MEMCHECK_TIME (120 s)
# The device tool brings back only a few files: everything is packed into OUT/results.tar.gz,
# and summary.txt and compare.txt are kept beside it.
set -uo pipefail
D=$(cd "$1" && pwd)
FINAL=$2
OUT=$(mktemp -d)
mkdir -p "$FINAL"
trap 'tar -C "$OUT" -czf "$FINAL/results.tar.gz" . ; cp "$OUT/summary.txt" "$OUT/compare.txt" "$FINAL/" 2>/dev/null' EXIT
export KINFER_DATA="$D/data"
export KINFER_ORDER_CACHE="$OUT/orders"
DEADLINE=${DEADLINE:-570}
t() { local left=$((DEADLINE - SECONDS - 15)); ((left < 5)) && left=5; echo $(($1 < left ? $1 : left)); }
over() { ((DEADLINE - SECONDS - 15 < 20)); }
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used \
  --format=csv > "$OUT/gpu_state.txt" 2>&1
log "device: $(tail -1 "$OUT/gpu_state.txt"); $(nproc) CPU cores"

timeout $(t 60) "$D/new/run" tests/test_gpu_policy > "$OUT/test_gpu_policy.log" 2>&1
log "test_gpu_policy rc=$? $(tail -1 "$OUT/test_gpu_policy.log")"
large=()
[[ ${SKIP_LARGE:-0} == 1 ]] && large=(env KINFER_GPU_SKIP_LARGE=1)
"${large[@]}" env KINFER_GPU_TEST_SCALE=${TEST_SCALE:-0.2} timeout $(t ${TEST_TIME:-240}) \
  "$D/new/run" tests/test_gpu_kernel > "$OUT/test_gpu_kernel.log" 2>&1
log "test_gpu_kernel rc=$? $(grep -E 'test cases|All tests' "$OUT/test_gpu_kernel.log" | tail -1)"
grep -E "buckets|2\^31|largest|=[0-9:]+: " "$OUT/test_gpu_kernel.log" | grep -v "^\[" | tee -a "$OUT/summary.txt"

cfg_args=()
for c in ${NEW_CONFIGS:-new}; do cfg_args+=(--config "$c"); done
bench() {  # NAME ARGS...: both builds, main first (it fills the order cache)
  local name=$1
  shift
  over && return
  timeout $(t 150) "$D/main/run" bench/gpu/bucket_bench "$@" --threads 16 --repeats 5 \
    --out "$OUT/main_$name.tsv" > "$OUT/main_$name.log" 2>&1
  log "bench main $name rc=$? ($(($(wc -l < "$OUT/main_$name.tsv") - 1)) rows)"
  over && return
  timeout $(t 200) "$D/new/run" bench/gpu/bucket_bench "$@" --threads 16 --repeats 5 \
    "${cfg_args[@]}" --out "$OUT/$name.tsv" > "$OUT/new_$name.log" 2>&1
  log "bench new $name rc=$? (${NEW_CONFIGS:-new})"
}
BENCHES=${BENCHES:-"linkage_13:--network,\$D/data/uai/linkage_13.uai,--min-log2,26 \
random:--random,24,--min-log2,25,--max-log2,29,--seed,5 \
linkage_17:--network,\$D/data/uai/linkage_17.uai,--min-log2,26 \
linkage_18:--network,\$D/data/uai/linkage_18.uai,--min-log2,25 \
linkage_14:--network,\$D/data/uai/linkage_14.uai.gz,--min-log2,24"}
for b in $BENCHES; do
  name=${b%%:*}
  args=${b#*:}
  args=${args//\$D/$D}
  IFS=, read -r -a argv <<< "$args"
  bench "$name" "${argv[@]}"
done
grep -h "^#" "$OUT"/new_*.log | head -12 | tee -a "$OUT/summary.txt"
for c in ${NEW_CONFIGS:-new}; do
  n=${c%%:*}
  python3 "$D/compare.py" "$OUT" --before main --after "$n" | tee -a "$OUT/compare.txt" | tail -4
done
if ! over; then
  LD_LIBRARY_PATH="$D/new/lib:/usr/local/cuda/lib64" KINFER_GPU_SKIP_LARGE=1 \
    KINFER_GPU_TEST_SCALE=${MEMCHECK_SCALE:-0.02} timeout $(t ${MEMCHECK_TIME:-120}) \
    /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$D/new/tests/test_gpu_kernel" \
    "${MEMCHECK_TESTS:-GpuKernel.ManyInputsMatchCpu,GpuKernel.RandomBucketsMatchCpu}" \
    > "$OUT/memcheck.log" 2>&1
  log "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
log "done"
