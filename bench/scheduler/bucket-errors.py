#!/usr/bin/env python3
"""Per-bucket kernel prediction errors of recorded schedule-compare runs: median over buckets
of |predicted/measured - 1| per network and over all of them, for each device (the executor's
dispatch cost, which a bucket timed alone does not include, is taken off the prediction, as
schedule-compare does).  usage: bucket-errors.py PROFILE.json RUN_DIR"""
import glob
import json
import os
import statistics
import sys

p = json.load(open(sys.argv[1]))
dispatch = {"cpu": p["cpu"].get("dispatch_seconds", 0),
            "gpu": (p.get("gpu") or {}).get("dispatch_seconds", 0)}
pooled = {"cpu": [], "gpu": []}
print("| network | buckets | CPU median | GPU median |")
print("|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(sys.argv[2], "*.buckets.tsv"))):
    rows = [l.rstrip("\n").split("\t") for l in open(f)]
    col = rows[0].index
    err = {"cpu": [], "gpu": []}
    for r in rows[1:]:
        for d in ("cpu", "gpu"):
            m = r[col(d + "_measured")]
            if m == "-" or float(m) <= 0:
                continue
            pred = float(r[col(d + "_predicted")]) - dispatch[d]
            if pred == float("inf"):
                continue
            err[d].append(abs(pred / float(m) - 1))
    med = {d: (f"{100 * statistics.median(e):.1f}%" if e else "-") for d, e in err.items()}
    print(f"| {os.path.basename(f)[:-len('.buckets.tsv')]} | {len(rows) - 1} | {med['cpu']} | {med['gpu']} |")
    for d in err:
        pooled[d] += err[d]
med = {d: (f"{100 * statistics.median(e):.1f}%" if e else "-") for d, e in pooled.items()}
print(f"| all | {len(pooled['cpu'])} | {med['cpu']} | {med['gpu']} |")
