#!/usr/bin/env python3
"""Two kernel builds or configurations side by side: joins DIR/main_*.tsv and DIR/new_*.tsv
(bucket_bench --out of each build on the same buckets) on (source, bucket) and prints, per bucket of at least 1 GFLOP, the selected variant's
time and roofline fraction before and after, then a summary over all joined buckets. Both
fractions use the `main` build's bound (its ceilings), so a change to the kernels' arithmetic
cannot move the roof under the comparison.

With --before/--after other prefixes than main/new are compared (bucket_bench --config NAME
writes NAME_*.tsv). "own roof" is the after kernel's time over the bound made with the kernel-2
arithmetic ceiling (roof2_ms), where the TSV has it.

usage: compare.py DIR [MIN_GFLOP] [--before main] [--after new]"""
import argparse
import csv
import glob
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return {(r["source"], r["bucket"]): r for r in csv.DictReader(f, delimiter="\t")}


ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("min_gflop", nargs="?", type=float, default=1.0)
ap.add_argument("--before", default="main")
ap.add_argument("--after", default="new")
args = ap.parse_args()
d = args.dir
min_gflop = args.min_gflop
print(f"before: {args.before}, after: {args.after}")
rows = []
for new_path in sorted(glob.glob(os.path.join(d, args.after + "_*.tsv"))):
    main_path = os.path.join(d, args.before + "_" + os.path.basename(new_path)[len(args.after) + 1:])
    if not os.path.exists(main_path):
        continue
    a, b = load(main_path), load(new_path)
    for k in b:
        if k in a:
            rows.append((a[k], b[k]))
f = lambda r, c: float(r[c])


def roof_after(a, b):
    return f(a, "roof_ms") / f(b, "t_auto_ms")


def own_roof(b):
    return f"{f(b, 'roof2_ms') / f(b, 't_auto_ms'):.2f}" if b.get("roof2_ms") else "-"


print("| bucket | outputs | M | inputs | GFLOP | before: selected | ms | roofline | after: selected "
      "| ms | roofline | own roof | speedup | plain before/after ms | diff to CPU |")
print("|---|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
big = []
for a, b in sorted(rows, key=lambda ab: -f(ab[1], "gflop")):
    if f(b, "gflop") < min_gflop:
        continue
    big.append((a, b))
    print(f"| {b['source']} {b['bucket']} | {b['n_out']} | {b['M']} | {b['n_in']} | "
          f"{f(b, 'gflop'):.2f} | {a['choice']} | {f(a, 't_auto_ms'):.3f} | "
          f"{f(a, 'roof_frac_auto'):.2f} | {b['choice']} | {f(b, 't_auto_ms'):.3f} | "
          f"{roof_after(a, b):.2f} | {own_roof(b)} | {f(a, 't_auto_ms') / f(b, 't_auto_ms'):.2f} | "
          f"{f(a, 't_plain_ms'):.3f}/{f(b, 't_plain_ms'):.3f} | {f(b, 'max_rel_diff'):.1e} |")


def summary(name, rs):
    if not rs:
        return
    sp = [f(a, "t_auto_ms") / f(b, "t_auto_ms") for a, b in rs]
    rb = [f(a, "roof_frac_auto") for a, b in rs]
    ra = [roof_after(a, b) for a, b in rs]
    tot = sum(f(a, "t_auto_ms") for a, b in rs) / sum(f(b, "t_auto_ms") for a, b in rs)
    half = sum(x >= 0.5 for x in ra)
    print(f"{name}: {len(rs)} buckets; speedup median {statistics.median(sp):.2f} "
          f"(min {min(sp):.2f}, max {max(sp):.2f}); roofline before median "
          f"{statistics.median(rb):.2f} [{min(rb):.2f}-{max(rb):.2f}], after median "
          f"{statistics.median(ra):.2f} [{min(ra):.2f}-{max(ra):.2f}]; at >= 0.5 after: {half}; "
          f"summed time before/after {tot:.3f}")


print()
summary(f"buckets >= {min_gflop} GFLOP", big)
summary("all joined buckets", rows)
worst = max((f(b, "max_rel_diff") for a, b in rows), default=0)
print(f"largest relative difference to the CPU (new, double): {worst:.2e}")
