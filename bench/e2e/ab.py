#!/usr/bin/env python3
"""Side-by-side A/B of environment settings on cold `kinfer pe` runs, interleaved (network by
network, round by round, the modes in turn) so that the machine's drift hits every mode alike.
Per run: the whole process's wall seconds, and from its -v trail the GPU's opening, the
executor's time and the command's end. Prints the median per network and mode; --out keeps rows.
usage: ab.py --kinfer CMD --data DIR --rounds N --mode NAME=VAR=VAL,VAR=VAL ... NETWORK...
(a mode with no VAR=VAL is the default environment)."""
import argparse
import os
import re
import shlex
import statistics
import subprocess
import time

ap = argparse.ArgumentParser()
ap.add_argument("--kinfer", required=True)
ap.add_argument("--data", required=True)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--mode", action="append", required=True)
ap.add_argument("--extra", default="--json --order-cache none")
ap.add_argument("--out")
ap.add_argument("networks", nargs="+")
a = ap.parse_args()
modes = []
for m in a.mode:
    name, _, env = m.partition("=")
    modes.append((name, dict(kv.split("=", 1) for kv in env.split(",") if kv)))
pat = {"opened": r"opened in ([0-9.]+) s", "executor": r"executor: ([0-9.]+) s",
       "end": r"at the command's end: ([0-9.]+) s", "logp": r'"log10_pr": (-?[0-9.e+-]+)'}
rows = []
for r in range(a.rounds):
    for n in a.networks:
        for name, env in modes:
            cmd = shlex.split(a.kinfer) + ["pe", f"{a.data}/{n}.uai"] + shlex.split(a.extra) + ["-v"]
            t0 = time.monotonic()
            p = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
            wall = time.monotonic() - t0
            txt = p.stderr + p.stdout
            row = {"round": r, "network": n, "mode": name, "rc": p.returncode, "wall": wall}
            for k, rx in pat.items():
                mm = re.search(rx, txt)
                row[k] = float(mm.group(1)) if mm else float("nan")
            rows.append(row)
if a.out:
    with open(a.out, "w") as f:
        keys = list(rows[0])
        f.write("\t".join(keys) + "\n")
        for row in rows:
            f.write("\t".join(str(row[k]) for k in keys) + "\n")
print("network\tmode\truns\tmedian wall s\tmedian opened s\tmedian executor s\tmedian end s\trc\tlog10 P(e) (all runs)")
for n in a.networks:
    for name, _ in modes:
        sel = [x for x in rows if x["network"] == n and x["mode"] == name]
        med = lambda k: statistics.median(x[k] for x in sel)
        print(f"{n}\t{name}\t{len(sel)}\t{med('wall'):.3f}\t{med('opened'):.3f}\t{med('executor'):.3f}"
              f"\t{med('end'):.3f}\t{','.join(sorted(set(str(x['rc']) for x in sel)))}"
              f"\t{' '.join(sorted(set(repr(x['logp']) for x in sel)))}")
