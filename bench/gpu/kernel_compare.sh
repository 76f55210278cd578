#!/usr/bin/env bash
# Kernel before/after in one GPU-machine call: the GPU tests of the new build, then the
# per-bucket benchmark of two builds side by side on the same buckets (random buckets from one
# seed; network buckets from one cached order, shared through KINFER_ORDER_CACHE), then a
# before/after table of the roofline fraction per bucket (bench/gpu/compare.py).
#
# usage (on the GPU machine): bench/gpu/kernel_compare.sh DIR OUT
#   DIR holds main/ and new/ (bundle-for-device of each build), data/uai/, compare.py
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
KINFER_GPU_TEST_SCALE=${TEST_SCALE:-0.2} timeout $(t 240) "$D/new/run" tests/test_gpu_kernel \
  > "$OUT/test_gpu_kernel.log" 2>&1
log "test_gpu_kernel rc=$? $(grep -E 'test cases|All tests' "$OUT/test_gpu_kernel.log" | tail -1)"
grep -E "buckets|2\^31|largest bucket" "$OUT/test_gpu_kernel.log" | tee -a "$OUT/summary.txt"

bench() {  # NAME ARGS...: both builds, main first (it fills the order cache)
  local name=$1
  shift
  for b in main new; do
    over && return
    timeout $(t 150) "$D/$b/run" bench/gpu/bucket_bench "$@" --threads 16 --repeats 5 \
      --out "$OUT/${b}_$name.tsv" > "$OUT/${b}_$name.log" 2>&1
    log "bench $b $name rc=$? ($(($(wc -l < "$OUT/${b}_$name.tsv") - 1)) rows)"
  done
}
bench linkage_13 --network "$D/data/uai/linkage_13.uai" --min-log2 26
bench random --random 24 --min-log2 25 --max-log2 29 --seed 5
bench linkage_17 --network "$D/data/uai/linkage_17.uai" --min-log2 26
bench linkage_18 --network "$D/data/uai/linkage_18.uai" --min-log2 25
bench linkage_14 --network "$D/data/uai/linkage_14.uai.gz" --min-log2 24
grep -h "^#" "$OUT/new_linkage_13.log" | head -12 | tee -a "$OUT/summary.txt"
python3 "$D/compare.py" "$OUT" | tee "$OUT/compare.txt"
if ! over; then
  LD_LIBRARY_PATH="$D/new/lib:/usr/local/cuda/lib64" KINFER_GPU_SKIP_LARGE=1 KINFER_GPU_TEST_SCALE=0.02 timeout $(t 120) compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$D/new/tests/test_gpu_kernel" "GpuKernel.ManyInputsMatchCpu,GpuKernel.RandomBucketsMatchCpu" \
    > "$OUT/memcheck.log" 2>&1
  log "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
