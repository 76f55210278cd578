#!/usr/bin/env python3
"""Summarises a `kinfer pe --gpu-timeline FILE` file: the GPU's busy time (union of the kernels' intervals),
its idle gaps longer than --gap ms with what the GPU thread was doing then, and the host steps.
usage: timeline.py FILE [--gap MS]"""
import argparse
import csv

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--gap", type=float, default=0.5)
a = ap.parse_args()
rows = list(csv.DictReader(open(a.file), delimiter="\t"))
for r in rows:
    for k in r:
        r[k] = float(r[k])
k = sorted([r for r in rows if r["gpu_end"] >= 0], key=lambda r: r["gpu_begin"])
busy, end, gaps = 0.0, 0.0, []
for r in k:
    if r["gpu_begin"] > end:
        gaps.append((end, r["gpu_begin"], r))
    busy += max(0.0, r["gpu_end"] - max(r["gpu_begin"], end))
    end = max(end, r["gpu_end"])
host_end = max(r["host_launch1"] for r in rows)
wait = sum(r["host_wait1"] - r["host_wait0"] for r in rows)
launch = sum(r["host_launch1"] - r["host_launch0"] for r in rows)
print(f"{a.file}: {len(rows)} GPU buckets; last kernel ends {1e3*end:.1f} ms, GPU busy "
      f"{1e3*busy:.1f} ms ({100*busy/max(end,1e-9):.0f}%); host: last launch returns "
      f"{1e3*host_end:.1f} ms, upload waits {1e3*wait:.1f} ms, launch calls {1e3*launch:.1f} ms")
print("  gaps (GPU idle) > %.1f ms: start..end ms, then the bucket that ended it: its host turn, wait, launch call" % a.gap)
for g0, g1, r in gaps:
    if (g1 - g0) * 1e3 > a.gap:
        print(f"    {1e3*g0:7.2f}..{1e3*g1:7.2f} ({1e3*(g1-g0):5.2f} ms) -> bucket {int(r['bucket'])} s{int(r['stream'])}:"
              f" turn {1e3*r['host_begin']:.2f}, wait {1e3*r['host_wait0']:.2f}-{1e3*r['host_wait1']:.2f},"
              f" launch {1e3*r['host_launch0']:.2f}-{1e3*r['host_launch1']:.2f}")
top = sorted(k, key=lambda r: r["gpu_end"] - r["gpu_begin"], reverse=True)[:6]
print("  longest kernels: " + ", ".join(f"{int(r['bucket'])} {1e3*(r['gpu_end']-r['gpu_begin']):.1f} ms" for r in top))
