#!/usr/bin/env python3
"""Table of run-pe-gpu.sh's results: per network and GPU placement, the first computation and
the median of the repeats after it, ln P(e), buckets on the GPU, bytes moved.
usage: summarize-pe.py DIR (the pe/ folder of one run)"""
import glob
import json
import os
import statistics
import sys

d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "linkage_*.json"))):
    net, sched = os.path.basename(f)[: -len(".json")].split(".", 1)
    try:
        j = json.load(open(f))
    except Exception as e:  # a run that failed or timed out
        rows.setdefault(net, {})[sched] = {"error": str(e)}
        continue
    rows.setdefault(net, {})[sched] = j


def ms(x):
    return "-" if x is None else f"{1e3 * x:.2f} ms" if x < 1 else f"{x:.2f} s"


def kb(x):
    return "-" if x is None else f"{x / 1e3:.1f} kB"


order = ["whole-plan", "gpu-only", "greedy", "comm-aware"]
print("| network (buckets) | --schedule | ran | first run | median of repeats | GPU buckets | to GPU | to CPU | ln P(e) |")
print("|---|---|---|---|---|---|---|---|---|")
best = {}
for net in sorted(rows, key=lambda n: int(n.split("_")[1])):
    first = True
    lns = []
    meds = {}
    for s in order + sorted(set(rows[net]) - set(order)):
        if s not in rows[net]:
            continue
        j = rows[net][s]
        label = f"{net} ({j.get('buckets', '?')})" if first else ""
        first = False
        if "error" in j:
            print(f"| {label} | {s} | FAILED ({j['error'][:40]}) | | | | | | |")
            continue
        sj = j.get("schedule", {})
        med = sj.get("repeat_median_seconds")
        meds[s] = med
        lns.append(j["ln_pr"])
        print(f"| {label} | {s} | {sj.get('policy')} | {ms(sj.get('first_run_seconds'))} | {ms(med)} | "
              f"{sj.get('buckets_gpu')} | {kb(sj.get('h2d_bytes'))} | {kb(sj.get('d2h_bytes'))} | {j['ln_pr']:.12g} |")
    if lns:
        spread = max(lns) - min(lns)
        ok = {k: v for k, v in meds.items() if v is not None}
        fastest = min(ok, key=ok.get) if ok else "-"
        best[net] = (fastest, spread, ok)
print()
print("| network | fastest (median) | whole-plan / comm-aware | max ln P(e) difference |")
print("|---|---|---|---|")
for net, (fastest, spread, ok) in best.items():
    ratio = ok["whole-plan"] / ok["comm-aware"] if "whole-plan" in ok and "comm-aware" in ok else float("nan")
    print(f"| {net} | {fastest} | {ratio:.2f} | {spread:.2g} |")
