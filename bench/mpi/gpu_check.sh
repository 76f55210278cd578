#!/bin/bash
# The multi-GPU code path on the GPU machine (one GPU there: one lane, the same seam): a pe whose
# plan is conditioned by --max-memory, on the GPU and on the CPU, must give the same ln P(e);
# the fake-device test of two lanes (Scheduler.SlicesOverTwoFakeDevices) runs there too.
# Usage: bench/mpi/gpu_check.sh BUNDLE_DIR DATA_DIR OUT_DIR (BUNDLE_DIR from bundle-for-device;
# DATA_DIR holds uai/ and profiles/ as data/ does)
set -uo pipefail
b=${1:?bundle}; data=${2:?data}; out=${3:?out}
mkdir -p "$out"
{
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | head -2
  echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"
  for case in linkage_21:16M linkage_14:24M; do
    net=${case%%:*} mem=${case#*:}
    for dev in cpu gpu; do
      t0=$(date +%s.%N)
      "$b/run" apps/kinfer pe "$data/uai/$net.uai.gz" --json --device $dev --order-time 0.5 \
        --max-memory $mem > "$out/$net-$dev.json" 2> "$out/$net-$dev.log"
      rc=$?
      echo "$net $dev: exit $rc, $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s wall"
    done
    python3 - "$out/$net-cpu.json" "$out/$net-gpu.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
d = abs(a["ln_pr"] - b["ln_pr"])
print(f"  ln P(e) cpu {a['ln_pr']!r} gpu {b['ln_pr']!r} |diff| {d:.3g} "
      f"slices {a.get('conditioning', {}).get('slices')} gpus {json.dumps(b.get('gpus'))} "
      f"device {b.get('device')} -> {'SAME (1e-9 rel)' if d <= 1e-9 * abs(a['ln_pr']) else 'DIFFERENT'}")
PY
  done
  KINFER_DATA="$data" "$b/run" tests/test_scheduler "Scheduler.SlicesOverTwoFakeDevices" 2>&1 | tail -3
} 2>&1 | tee "$out/summary.txt"
