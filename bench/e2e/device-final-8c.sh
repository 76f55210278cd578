#!/bin/bash
# After the chain's emission tables went under --max-memory (linkage/inheritance.cpp): the GPU
# chain's test, c250 and c40 on the GPU (ln L against this machine's), and c250 on the GPU under
# --max-memory 1500M (its 1.4 GiB of tables do not fit beside the CUDA context: the chain runs on
# the CPU, recomputing what has no room) with wait4's peak RSS.
set -u
B=${B:-.dev-final}; R=$OUT/final8c; mkdir -p "$R"
k="$B/run apps/kinfer"
( cd "$B" && timeout 60 ./run tests/test_gpu_chain ) > "$R/test_gpu_chain.txt" 2>&1; echo "exit $?" >> "$R/test_gpu_chain.txt"
python3 - "$k" "$B/dense" "$R" > "$R/dense.txt" 2>&1 <<'PY'
import json, os, shlex, subprocess, sys, time
k, d, r = sys.argv[1], sys.argv[2], sys.argv[3]
def run(name, mem, dev, case, pos):
    cmd = shlex.split(k) + ["-v", "lod", "--json", "--max-memory", mem, "--program", "linkmap", "--moving", "1",
           "--device", dev, "--ped", f"{d}/{case}.ped", "--dat", f"{d}/{case}.dat", "--positions", pos]
    with open(f"{r}/{name}.log", "wb") as err, open(f"{r}/{name}.json", "wb") as out:
        t0 = time.time(); p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, st, ru = os.wait4(p.pid, 0); w = time.time() - t0
    rc = os.waitstatus_to_exitcode(st)
    try:
        a = json.load(open(f"{r}/{name}.json")); b = json.load(open(f"{d}/{case}-here.json"))
        la = [e["total"]["ln_l"] for e in a["evaluations"]]; lb = {round(e["position"], 6) if "position" in e else i: e["total"]["ln_l"] for i, e in enumerate(b["evaluations"])}
        lb = [e["total"]["ln_l"] for e in b["evaluations"]]
        diff = max(abs(x - y) for x, y in zip(la, lb)) if len(la) == len(lb) else f"{len(la)} vs {len(lb)} positions"
    except Exception as e:
        diff = f"compare failed {e}"
    print(f"{name} rc {rc} wall {w:.2f} s peak RSS {ru.ru_maxrss / 1024:.0f} MiB max |d ln L| {diff}", flush=True)
run("c250-gpu", "8G", "gpu", "c250", "-5:129.5:1")
run("c40-gpu", "8G", "gpu", "c40", "-5:200:2")
run("c250-gpu-1500M", "1500M", "gpu", "c250", "-5:129.5:1")
run("c250-cpu16-1500M", "1500M", "cpu", "c250", "-5:129.5:1")
PY
grep -h "chain on\|refused\|evaluation(s) in" "$R"/c*.log >> "$R/dense.txt"
rm -f "$R"/c*.json
tar -C "$OUT" -czf "$OUT/final8c.tgz" final8c && rm -rf "$R"
