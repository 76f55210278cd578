#!/usr/bin/env python3
"""The roofline census of bucket_bench TSVs: every bucket of at least MIN_GFLOP (default 1), its
selected kernel's fraction of the HBM roofline bound (roof_frac_auto) as the plan has the bucket
and, where bucket_bench --merge timed it as the executor merges its small factor inputs
(source NAME+merge), as the executor runs it; then how many reach half the bound either way.

usage: roofline_census.py FILE.tsv... [--min-gflop G]"""
import argparse
import csv

ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="+")
ap.add_argument("--min-gflop", type=float, default=1.0)
a = ap.parse_args()
plain, merged = {}, {}
for path in a.files:
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            src = r["source"]
            if src.endswith("+merge"):
                merged[(src[: -len("+merge")], r["bucket"])] = r
            else:
                plain[(src, r["bucket"])] = r
rows = [r for r in plain.values() if float(r["gflop"]) >= a.min_gflop]
rows.sort(key=lambda r: -float(r["gflop"]))
print("| bucket | outputs | M | inputs | GFLOP | selected | ms | roofline | as run: inputs | ms | roofline | diff to CPU |")
print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
as_plan = as_run = 0
for r in rows:
    key = (r["source"], r["bucket"])
    m = merged.get(key)
    f = float(r["roof_frac_auto"])
    g = float(m["roof_frac_auto"]) if m else f
    as_plan += f >= 0.5
    as_run += g >= 0.5
    ms = f"| {m['n_in']} | {float(m['t_auto_ms']):.3f} | {g:.2f} |" if m else "| | | |"
    print(f"| {key[0]} {key[1]} | {r['n_out']} | {r['M']} | {r['n_in']} | {float(r['gflop']):.2f} | "
          f"{r['choice']} | {float(r['t_auto_ms']):.3f} | {f:.2f} {ms} {float(r['max_rel_diff']):.1e} |")
print(f"\nbuckets >= {a.min_gflop:g} GFLOP: {len(rows)}; at >= half the roofline as the plan has "
      f"them: {as_plan}; as the executor runs them (merged inputs where it merges): {as_run}")
