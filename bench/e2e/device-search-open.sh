#!/bin/bash
# Ran on branch exp/search-while-device-starts (670c761), not main: the experiment was measured and not merged.
# Issue 12: the unseeded GPU-sized order search goes on while the device starts and now stops
# within a greedy step of its opening (OrderOptions::keep_searching, checked inside the rounds).
# Cold `pe --device auto` without a seed (the extension) against `--seed 1` (the same search, the
# default seed, no extension), alternating, after 4 s idle (a single run) and 0.25 s apart; then
# the auto vs cpu table, pedigree50 and --check linkage_17.
# Bundle: bench/e2e/bundle.sh build .dev-search-open SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin search-open
python3 - "$B/run apps/kinfer" "$D" > $R/search.tsv 2> $R/search.err <<'PY'
import json, subprocess, sys, time
kinfer, D = sys.argv[1].split(), sys.argv[2]
print("gap_s\tmode\tnetwork\trun\twall_s\tplan_s\tcompute_s\torder_s\tlog2_total\textra_rounds\tstopped_by\twork\tlog10_pr")
def one(gap, mode, net, i):
    extra = ["--seed", "1"] if mode == "seed1" else []
    time.sleep(gap)
    t0 = time.time()
    o = subprocess.run(kinfer + ["pe", f"{D}/{net}.uai", "--json", "--order-cache", "none"] + extra,
                       capture_output=True, text=True)
    w = time.time() - t0
    try:
        j = json.loads(o.stdout); t = j["timings"]; od = j["order"]
        row = [f"{t['plan']:.4f}", f"{t['compute']:.4f}", f"{od['seconds']:.4f}",
               f"{od['log2_total_state']:.3f}", str(od.get("extra_rounds", "")), od["stopped_by"],
               f"{od['work']:.3f}", f"{j['log10_pr']:.8f}"]
    except Exception:
        row = [f"rc={o.returncode}"]
    print("\t".join([str(gap), mode, net, str(i), f"{w:.4f}"] + row), flush=True)
nets = ["linkage_11", "linkage_17", "linkage_12", "linkage_13", "linkage_14", "linkage_18"]
for net in nets:
    for i in range(2):
        for mode in ["unseeded", "seed1"]: one(4, mode, net, i)
for net in nets:
    for i in range(2):
        for mode in ["unseeded", "seed1"]: one(0.25, mode, net, i)
PY
cat $R/search.tsv
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_21 Pedigree_11
e2e_check linkage_17
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
e2e_end 5
