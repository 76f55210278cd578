#!/usr/bin/env python3
"""Benchmark of `kinfer batch`: N jobs as one batch vs the same jobs run one after another with
the single commands, side by side in one run. Jobs: the bundled UAI instances (data/uai) in turn,
each repeat either with the network's own evidence (same structure: the batch shares the
elimination order) or with a random tenth of its observations dropped.

  scripts/bench_batch.py [--jobs-total 200] [--kinfer build/apps/kinfer] [--label NAME]

Writes bench/batch/results-<label>.tsv and prints the table."""
import argparse
import glob
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs-total", type=int, default=200)
    ap.add_argument("--kinfer", default=os.path.join(ROOT, "build", "apps", "kinfer"))
    ap.add_argument("--label", default=socket.gethostname())
    ap.add_argument("--concurrency", type=int, default=0, help="--jobs of the batch (default: cores)")
    a = ap.parse_args()
    rng = random.Random(7)
    work = tempfile.mkdtemp(prefix="kinfer-bench-batch-")
    nets = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "uai", "*.uai*"))):
        if path.endswith(".evid"):
            continue
        base = os.path.basename(path)
        shutil.copy(path, work)
        ev = os.path.join(ROOT, "data", "uai", base.replace(".gz", "") + ".evid")
        nets.append((base, ev if os.path.exists(ev) else None))
    jobs = []
    for i in range(a.jobs_total):
        net, ev = nets[i % len(nets)]
        evid = ""
        if ev and i >= len(nets) and rng.random() < 0.5:
            # other evidence: the same observations less a random tenth (always valid; a changed
            # reduced structure means no shared order). The other repeats keep the network's own
            # evidence, so their structure, and their elimination order, is shared.
            toks = open(ev).read().split()
            if toks and toks[0] != "0":
                k = int(toks[0])
                pairs = [(toks[1 + 2 * j], toks[2 + 2 * j]) for j in range(k)]
                kept = [p for p in pairs if rng.random() >= 0.1]
                evid = f"ev{i}.evid"
                with open(os.path.join(work, evid), "w") as f:
                    f.write(str(len(kept)) + "".join(f" {var} {val}" for var, val in kept) + "\n")
        jobs.append((f"job{i:03d}", net, evid))
    with open(os.path.join(work, "manifest.tsv"), "w") as f:
        f.write("id\tkind\tnetwork\tevidence\n")
        for j, n, e in jobs:
            f.write(f"{j}\tpe\t{n}\t{e}\n")

    # 1. one after another, single commands
    t0 = time.time()
    single = {}
    for j, n, e in jobs:
        cmd = [a.kinfer, "pe", "-q", "--json", os.path.join(work, n)]
        if e:
            cmd += ["-e", os.path.join(work, e)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        single[j] = json.loads(r.stdout)["log10_pr"] if r.returncode == 0 else f"exit {r.returncode}"
    t_single = time.time() - t0

    # 2. one batch
    t0 = time.time()
    cmd = [a.kinfer, "batch", os.path.join(work, "manifest.tsv"), "--out", os.path.join(work, "out")]
    if a.concurrency:
        cmd += ["--jobs", str(a.concurrency)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    t_batch = time.time() - t0
    agree = 0
    for j, _, _ in jobs:
        p = os.path.join(work, "out", "results", j + ".json")
        if os.path.exists(p):
            got = json.load(open(p))["log10_pr"]
            if got == single[j] or (isinstance(got, float) and isinstance(single[j], float) and abs(got - single[j]) < 1e-9):
                agree += 1
        elif not isinstance(single[j], float):
            agree += 1  # failed both ways
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    row = {"label": a.label, "commit": commit, "jobs": len(jobs), "cores": os.cpu_count(),
           "single_s": round(t_single, 2), "batch_s": round(t_batch, 2),
           "ratio": round(t_single / t_batch, 2), "answers_agree": f"{agree}/{len(jobs)}",
           "batch_exit": r.returncode, "date": time.strftime("%Y-%m-%d %H:%M")}
    print("\t".join(row))
    print("\t".join(str(v) for v in row.values()))
    os.makedirs(os.path.join(ROOT, "bench", "batch"), exist_ok=True)
    out = os.path.join(ROOT, "bench", "batch", f"results-{a.label}.tsv")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\t".join(row) + "\n" + "\t".join(str(v) for v in row.values()) + "\n")
    os.replace(tmp, out)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
