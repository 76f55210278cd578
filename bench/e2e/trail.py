#!/usr/bin/env python3
"""Runs kinfer commands one process each with -v and keeps, per run, the wall seconds of the whole
process, wait4's peak RSS and the debug log's resource trail ("resources at ...": seconds since
start, RSS, peak RSS) so that a run's time and memory can be placed on its phases.

usage: trail.py --kinfer CMD --out DIR NAME=ARGS...   (ARGS: one shell-quoted string)
Writes DIR/NAME.log (stderr) and appends a row per run to DIR/trail.tsv.
"""
import argparse, os, re, shlex, subprocess, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--kinfer", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--timeout", type=float, default=60)
ap.add_argument("runs", nargs="+")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
tsv = os.path.join(a.out, "trail.tsv")
new = not os.path.exists(tsv)
with open(tsv, "a") as out:
    if new:
        out.write("run\trc\twall_s\tpeak_rss_mib\tlast_logged_s\ttrail\n")
    for spec in a.runs:
        name, args = spec.split("=", 1)
        cmd = shlex.split(a.kinfer) + shlex.split(args) + ["-v"]
        with open(os.path.join(a.out, name + ".log"), "wb") as err, tempfile.TemporaryFile() as so:
            t0 = time.time()
            p = subprocess.Popen(cmd, stdout=so, stderr=err)
            try:
                _, status, ru = os.wait4(p.pid, 0)
            except Exception:
                p.kill(); raise
            wall = time.time() - t0
            so.seek(0)
            err.write(b"\n--- stdout ---\n" + so.read())
        rc = os.waitstatus_to_exitcode(status)
        trail, last = [], 0.0
        for line in open(os.path.join(a.out, name + ".log"), errors="replace"):
            m = re.search(r"resources at (.*?): ([0-9.]+) s, RSS (\d+) MiB, peak RSS (\d+) MiB", line)
            if m:
                trail.append(f"{m.group(1)} {float(m.group(2)):.3f}s {m.group(3)}/{m.group(4)}")
                last = float(m.group(2))
        out.write(f"{name}\t{rc}\t{wall:.3f}\t{ru.ru_maxrss / 1024:.0f}\t{last:.3f}\t{' | '.join(trail)}\n")
        out.flush()
        print(name, rc, f"{wall:.3f}s", f"{ru.ru_maxrss / 1024:.0f} MiB", flush=True)
