#!/usr/bin/env bash
# Kernel configurations of one build side by side in one GPU-machine call (issue 12 part 4):
# every bucket is timed under each configuration in the same process (bucket_bench --config:
# one Context per configuration, the same inputs, one CPU reference), so the comparison needs no
# second build (a before/after against another build: kernel_compare.sh). The default configs:
# `main` = the defaults, `lanes16` = the lanes rule before device call 4, `nodirect` = no direct
# inputs.
# Then the profiler on the root bucket of linkage_18 and the largest linkage_13 bucket (both
# kernels), the GPU tests at a small scale and the memory checker.
#
# usage (on the GPU machine): bench/gpu/kernel_variants.sh DIR OUT [quick]
# environment: CONFIGS, NETS, MIN_LOG2, NRANDOM, DEADLINE, TEST_ENV, TESTS, TEST_TIME, PROFS
# (NAME:NETWORK:MIN_LOG2:KERNEL_REGEX[:VAR=VAL] ...)
#   DIR holds new/ (bundle-for-device of the build), data/uai/, compare.py
# Everything is packed into OUT/results.tar.gz; summary.txt and compare.txt are kept beside it.
set -uo pipefail
D=$(cd "$1" && pwd)
FINAL=$2
MODE=${3:-full}
OUT=$(mktemp -d)
mkdir -p "$FINAL"
trap 'tar -C "$OUT" -czf "$FINAL/results.tar.gz" . ; cp "$OUT/summary.txt" "$OUT/compare.txt" "$FINAL/" 2>/dev/null' EXIT
export KINFER_DATA="$D/data"
export KINFER_ORDER_CACHE="$OUT/orders"
export LD_LIBRARY_PATH="$D/new/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
DEADLINE=${DEADLINE:-280}
t() { local left=$((DEADLINE - SECONDS - 10)); ((left < 5)) && left=5; echo $(($1 < left ? $1 : left)); }
over() { ((DEADLINE - SECONDS - 10 < 15)); }
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$OUT/summary.txt"; }
NCU=${NCU:-/usr/local/cuda/bin/ncu}
CONFIGS=${CONFIGS:-"main lanes16:KINFER_GPU_LANES=32:16 nodirect:KINFER_GPU_DIRECT=0"}
cfg_args=()
for c in $CONFIGS; do cfg_args+=(--config "$c"); done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used \
  --format=csv > "$OUT/gpu_state.txt" 2>&1
log "device: $(tail -1 "$OUT/gpu_state.txt"); $(nproc) CPU cores; configs: $CONFIGS"

# the inner loops' machine code (free: no device time)
if command -v /usr/local/cuda/bin/cuobjdump > /dev/null; then
  /usr/local/cuda/bin/cuobjdump -sass "$D/new/bench/gpu/bucket_bench" > "$OUT/all.sass" 2>&1
  log "sass: $(grep -c 'Function :' "$OUT/all.sass") functions"
  # instructions per kernel (whole function) for the nf = 3 and 5 cases, per compile-time lanes
  for fn in plain3_kernelIdLi3ELi32E plain3_kernelIdLi3ELi8E plain3_kernelIdLi3ELi4E \
    plain3_kernelIdLi3ELi0E plain3_kernelIdLi5ELi32E plain3_kernelIdLi5ELi0E cached_kernelIdLi3ELb1E; do
    awk -v f="$fn" '/Function :/ {on = index($0, f) > 0} on && /^ +\/\*[0-9a-f]+\*\/ / {n++} END {print f, n}' \
      "$OUT/all.sass" | tee -a "$OUT/summary.txt"
  done
fi

bench() {  # NAME ARGS...: every configuration in one process
  local name=$1
  shift
  over && return
  timeout $(t 120) "$D/new/run" bench/gpu/bucket_bench "$@" --threads 16 --repeats 5 --cpu-runs 1 \
    --no-f32 "${cfg_args[@]}" --out "$OUT/$name.tsv" > "$OUT/bench_$name.log" 2>&1
  local rc=$? first=${CONFIGS%% *}
  log "bench $name rc=$rc ($(($(wc -l < "$OUT/${first%%:*}_$name.tsv" 2> /dev/null || echo 1) - 1)) rows)"
}
MIN=${MIN_LOG2:-27}
for net in ${NETS:-linkage_18 linkage_13 linkage_17}; do
  bench $net --network "$D/data/uai/$net.uai" --min-log2 $MIN
done
bench random --random ${NRANDOM:-8} --min-log2 26 --max-log2 28.5 --seed 5
NETS=${NETS:-linkage_18 linkage_13 linkage_17}
grep -h "^#" "$OUT/bench_${NETS%% *}.log" | head -14 | tee -a "$OUT/summary.txt"
for c in $CONFIGS; do
  n=${c%%:*}
  [[ $n == main ]] && continue
  python3 "$D/compare.py" "$OUT" --before main --after "$n" | tee -a "$OUT/compare.txt" | tail -4
done

# correctness: the GPU tests at a small scale (the 2^31-output bucket skipped), memory checker
# TEST_ENV: e.g. KINFER_GPU_LANES=32:16 runs every case under that setting; TESTS: the cases (Catch2)
env ${TEST_ENV:-} KINFER_GPU_SKIP_LARGE=1 KINFER_GPU_TEST_SCALE=${TEST_SCALE:-0.03} \
  timeout $(t ${TEST_TIME:-120}) "$D/new/run" tests/test_gpu_kernel ${TESTS:-} \
  > "$OUT/test_gpu_kernel.log" 2>&1
log "test_gpu_kernel rc=$? $(grep -E 'test cases|All tests' "$OUT/test_gpu_kernel.log" | tail -1)"
grep -E "buckets|variants|=1:|=0:|=3:" "$OUT/test_gpu_kernel.log" | tee -a "$OUT/summary.txt"
timeout $(t 30) "$D/new/run" tests/test_gpu_policy > "$OUT/test_gpu_policy.log" 2>&1
log "test_gpu_policy rc=$? $(tail -1 "$OUT/test_gpu_policy.log")"
# profiler: the plain kernel on the root bucket of linkage_18 and a large linkage_13 bucket
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section Occupancy --section SchedulerStats \
  --section WarpStateStats --section InstructionStats --section LaunchStats"
METRICS="--metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_fp64.sum,sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_lg.sum,sm__cycles_elapsed.avg"
prof() {  # NAME NETWORK MIN_LOG2 KERNEL_REGEX ENV...
  local name=$1 net=$2 min=$3 re=$4
  shift 4
  over && return
  env "$@" timeout $(t 60) "$NCU" $SECTIONS $METRICS -k "regex:$re" -c 1 \
    "$D/new/bench/gpu/bucket_bench" --network "$D/data/uai/$net.uai" --min-log2 "$min" \
    --repeats 1 --cpu-runs 1 --no-f32 --threads 16 --out "$OUT/ncu_$name.tsv" > "$OUT/ncu_$name.txt" 2>&1
  log "ncu $name rc=$? $(grep -E 'Duration|Compute \(SM\) Throughput|L1/TEX Cache Throughput' "$OUT/ncu_$name.txt" | tr -s ' ' | tr '\n' ';')"
}
if [[ $MODE != quick ]]; then
  if [[ -n ${PROFS:-} ]]; then  # NAME:NETWORK:MIN_LOG2:KERNEL_REGEX[:VAR=VAL] ...
    for pr in $PROFS; do
      IFS=: read -r pn pnet pmin pre penv <<< "$pr"
      prof "$pn" "$pnet" "$pmin" "$pre" ${penv:-KINFER_GPU_NONE=0}
    done
  else
    prof l18 linkage_18 27 'plain3_kernel'
    prof l13 linkage_13 29.9 'plain3_kernel'
  fi
fi

if ! over; then
  env ${TEST_ENV:-} KINFER_GPU_SKIP_LARGE=1 KINFER_GPU_TEST_SCALE=0.003 timeout $(t 60) /usr/local/cuda/bin/compute-sanitizer \
    --tool memcheck --error-exitcode 9 "$D/new/tests/test_gpu_kernel" \
    "GpuKernel.KernelVariantsMatchCpu,GpuKernel.RandomBucketsMatchCpu,GpuKernel.ManyInputsMatchCpu" \
    > "$OUT/memcheck.log" 2>&1
  log "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
log "done"
