#!/bin/bash
# Issue 12: the process's end after a GPU run (the driver's release of the device, ~0.11 s after
# "the command's end") left to a helper process (apps/process_exit.cpp). Cold `pe --device auto`
# back to back and after the GPU sat idle 5 s, with the helper (default) and without
# (KINFER_EXIT=wait), side by side; the helper's lifetime after kinfer ended; the auto vs cpu
# table, pedigree50, --check and the GPU kernel test.
# Bundle: bench/e2e/bundle.sh build .dev-exit SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin ${EXIT_NAME:-exit}
python3 - "$B/run apps/kinfer" "$D" > $R/exit.tsv 2> $R/exit.err <<'PY'
import json, os, subprocess, sys, time
kinfer, D = sys.argv[1].split(), sys.argv[2]
print("condition\texit\tnetwork\trun\twall_s\tcompute_s\tplan_s\tdevice\tlog10_pr\thelper_alive_s")
def helpers():  # kinfer processes still running (zombies, state Z, have ended: not counted)
    out = subprocess.run(["ps", "-eo", "stat=,comm="], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if l.split()[1:] == ["kinfer"] and not l.startswith("Z")]
def one(cond, mode, net, i):
    env = dict(os.environ)
    env["KINFER_EXIT"] = "wait" if mode == "wait" else "fast"  # fast: the helper even where process 1 does not reap (zombies)
    t0 = time.time()
    o = subprocess.run(kinfer + ["pe", f"{D}/{net}.uai", "--json", "--order-cache", "none"],
                       capture_output=True, text=True, env=env)
    w = time.time() - t0
    alive = 0.0
    while helpers() and alive < 2:
        time.sleep(0.005); alive = time.time() - t0 - w
    try:
        j = json.loads(o.stdout); t = j["timings"]
        row = [f"{t['compute']:.4f}", f"{t['plan']:.4f}", j["device"], f"{j['log10_pr']:.8f}"]
    except Exception:
        row = ["", "", f"rc={o.returncode}", ""]
    print("\t".join([cond, mode, net, str(i), f"{w:.4f}"] + row + [f"{alive:.4f}"]), flush=True)
nets = ["linkage_11", "linkage_17", "linkage_12", "linkage_13", "linkage_14", "linkage_18"]
for net in nets:
    for mode in ["helper", "wait", "helper", "wait"]:
        for i in range(2): one("back-to-back", mode, net, i)
for net in ["linkage_11", "linkage_17", "linkage_13"]:
    for mode in ["helper", "wait"]:
        for i in range(2):
            time.sleep(5); one("idle-5s", mode, net, i)
PY
cat $R/exit.tsv
e2e_cold3 linkage_11
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_21 Pedigree_11
e2e_check linkage_11
e2e_gpu_kernel_test
sleep 1; echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
e2e_end 5
