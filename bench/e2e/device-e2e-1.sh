#!/bin/bash
# Issue 12, end to end: where the first and the last 0.1-0.3 s of a GPU run go. A bare CUDA
# program's start and exit (bench/e2e/cuda_exit.cu, built by hand into the bundle), then the
# resource trail (-v) of --device auto runs with the GPU started at the search's first round and
# each kernel plan's preparation logged. Bundle: bench/e2e/bundle.sh -> .dev-e2e (+ cuda_exit).
set -u
B=${B:-.dev-e2e}; R=$OUT/e2e1; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles
k="$B/run apps/kinfer"; D=$B/data/uai
{ nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv; nvidia-smi -q | grep -i -A2 "persistence\|compute mode"; ls -la /dev/nvidia* /proc/driver/nvidia/gpus; nproc; } > $R/machine.txt 2>&1
python3 - "$B/cuda_exit" > $R/cuda_exit.tsv 2>&1 <<'PY'
import os, subprocess, sys, time
exe = sys.argv[1]
print("mode\tenv\trun\twall_s\tlast_printed_s\tsteps")
for env in ["", "EAGER"]:
    for mode, arg in [("none", "0"), ("count", "0"), ("context", "0"), ("kernel", "64"), ("kernel", "16384"), ("free", "64")]:
        for i in range(3):
            e = dict(os.environ)
            if env: e["CUDA_MODULE_LOADING"] = env
            t0 = time.time(); o = subprocess.run([exe, mode, arg], capture_output=True, text=True, env=e); w = time.time() - t0
            last = o.stdout.split()[-2] if mode != "count" and o.stdout.split() else (o.stdout.split() or ["?","?"])[1]
            print(f"{mode}:{arg}\t{env or 'default'}\t{i}\t{w:.4f}\t{last}\t{' '.join(o.stdout.split())}")
PY
t="python3 $B/trail.py --kinfer \"$k\" --out $R"
eval $t "tiny-cpu=\"pe $D/Pedigree_11.uai --device cpu\"" "tiny-auto=\"pe $D/Pedigree_11.uai\"" "tiny-gpu=\"pe $D/Pedigree_11.uai --device gpu\""
for n in linkage_16 linkage_21; do
  eval $t "$n-auto=\"pe $D/$n.uai --json --order-cache none\"" "$n-cpu=\"pe $D/$n.uai --json --order-cache none --device cpu\""
done
for n in linkage_17 linkage_13 linkage_11 linkage_12 linkage_14 linkage_18; do
  eval $t "$n-auto-cold1=\"pe $D/$n.uai --json --order-cache none\"" "$n-auto-cold2=\"pe $D/$n.uai --json --order-cache none\"" \
          "$n-auto-first=\"pe $D/$n.uai --json\"" "$n-auto-warm=\"pe $D/$n.uai --json\""
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/e2e1.tgz e2e1 && rm -rf $R
