#!/usr/bin/env python3
"""Two or more kinfer binaries side by side: every command of a spec file run by each binary in
turn, the binaries alternated over the rounds (a warm-up run by the first binary before each
command's rounds), one TSV row per run.

usage: sidebyside.py --out DIR --rounds 3 --bin old=PATH --bin new=PATH SPECFILE

SPECFILE: one command per line, `LABEL<TAB>kinfer arguments` (pe, mar or mpe; `--json` is added);
lines starting with # are skipped. Rows go to DIR/runs.tsv: label, binary, round, exit code, wall
seconds, log10_pr, timings.compute, GPU buckets, CPU buckets, bytes downloaded, device, slices.
Each binary's first-round JSON is kept as DIR/LABEL.BINARY.json. Run it with one order cache for
all binaries (KINFER_ORDER_CACHE=DIR) so that they compute the same orders.
"""
import argparse, json, os, shlex, subprocess, time

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--bin", action="append", required=True, help="NAME=PATH (repeat)")
ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
ap.add_argument("specs")
a = ap.parse_args()
bins = [b.split("=", 1) for b in a.bin]
specs = [l.rstrip("\n").split("\t", 1) for l in open(a.specs) if l.strip() and not l.startswith("#")]
os.makedirs(a.out, exist_ok=True)
tsv = open(os.path.join(a.out, "runs.tsv"), "a")


def run(path, args, tag):
    t0 = time.time()
    p = subprocess.run([path] + shlex.split(args) + ["--json"], capture_output=True, text=True,
                       timeout=a.timeout)
    wall = time.time() - t0
    try:
        d = json.loads(p.stdout)
    except ValueError:
        d = {}
    s, t = d.get("schedule") or {}, d.get("timings") or {}
    row = tag + [p.returncode, "%.3f" % wall, d.get("log10_pr"), "%.4f" % t.get("compute", -1),
                 s.get("buckets_gpu"), s.get("buckets_cpu"), s.get("d2h_bytes"), d.get("device"),
                 d.get("slices")]
    if p.returncode != 0:
        err = p.stderr.strip().splitlines()
        row.append(err[-1][:200] if err else "")
    print("\t".join(map(str, row)), file=tsv, flush=True)
    print("\t".join(map(str, row)), flush=True)
    return d


for label, args in specs:
    run(bins[0][1], args, [label, "warm-up", 0])
    for r in range(1, a.rounds + 1):
        for name, path in bins:
            d = run(path, args, [label, name, r])
            if r == 1:
                with open(os.path.join(a.out, "%s.%s.json" % (label.replace(" ", "_"), name)), "w") as f:
                    json.dump(d, f)
