#!/bin/bash
# Issue 12: why a GPU run's device start is slower in the measured tables (0.35-0.43 s) than in
# back-to-back runs (0.22-0.26 s). Separates the candidates: the GPU sitting idle for a while,
# a heavy 16-core CPU run just before (the tables run each auto row after a `--device cpu` row),
# and a large host allocation just before. A bare CUDA program's context (bench/e2e/cuda_exit.cu,
# built here: nvcc -O2 -arch=sm_90 -o .dev-idle/cuda_exit bench/e2e/cuda_exit.cu) and kinfer's
# cold `pe --device auto` on linkage_11 under each condition.
# Bundle: bench/e2e/bundle.sh build .dev-idle SHARED_UAI (+ cuda_exit).
. "$(dirname "$0")/lib.sh"
e2e_begin idle
nvidia-smi -q -d PERFORMANCE,CLOCK,POWER > $R/smi-start.txt 2>&1
python3 - "$B/cuda_exit" "$B/run apps/kinfer" "$D" > $R/idle.tsv 2> $R/idle.err <<'PY'
import json, os, subprocess, sys, time
exe, kinfer, D = sys.argv[1], sys.argv[2].split(), sys.argv[3]
print("condition\trun\twhat\twall_s\tdetail")
def context(cond, i):
    t0 = time.time(); o = subprocess.run([exe, "context"], capture_output=True, text=True)
    w = time.time() - t0
    print(f"{cond}\t{i}\tcontext\t{w:.4f}\t{' '.join(o.stdout.split())}", flush=True)
def auto(cond, i, net="linkage_11"):
    t0 = time.time()
    o = subprocess.run(kinfer + ["pe", f"{D}/{net}.uai", "--json", "--order-cache", "none", "-v"],
                       capture_output=True, text=True)
    w = time.time() - t0
    opened = [l[l.find("]", 15) + 1:].strip() for l in o.stderr.splitlines() if " opened in " in l]
    try:
        j = json.loads(o.stdout); det = f"{net} device={j.get('device')} log10={j.get('log10_pr')} t={j.get('timings')}"
    except Exception:
        det = f"{net} rc={o.returncode}"
    print(f"{cond}\t{i}\tauto\t{w:.4f}\t{det} | {' || '.join(opened[:3])}", flush=True)
def cpu_run():
    subprocess.run(kinfer + ["pe", f"{D}/linkage_17.uai", "--device", "cpu", "--order-cache", "none"],
                   capture_output=True)
def big_alloc():
    subprocess.run([sys.executable, "-c", "b = bytearray(20 << 30); b[::4096] = b'x' * len(b[::4096])"])
for i in range(4): context("back-to-back", i)
for idle in [1, 3, 10, 30]:
    for i in range(2):
        time.sleep(idle); context(f"idle-{idle}s", i)
for i in range(2):
    cpu_run(); context("after-cpu-run", i)
for i in range(2):
    big_alloc(); context("after-20GiB-alloc", i)
for i in range(3): auto("back-to-back", i)
for i in range(2):
    time.sleep(10); auto("idle-10s", i)
for i in range(2):
    cpu_run(); auto("after-cpu-run", i)
for i in range(2):
    big_alloc(); auto("after-20GiB-alloc", i)
for i in range(2): auto("back-to-back-again", i)
PY
nvidia-smi -q -d PERFORMANCE,CLOCK,POWER > $R/smi-end.txt 2>&1
cat $R/idle.tsv; tail -5 $R/idle.err
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
