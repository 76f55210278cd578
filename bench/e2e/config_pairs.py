#!/usr/bin/env python3
"""Two bucket_bench configurations side by side, bucket by bucket: the CONFIG_*.tsv files that
`bucket_bench --config A... --config B... --out DIR/NAME.tsv` writes in DIR, joined on (file,
source, bucket). Prints per bucket: outputs, M, varying inputs, GFLOP, each configuration's
selected kernel, plain and selected times (ms), roofline fractions, and B's largest difference
to the CPU.
usage: config_pairs.py DIR A B"""
import csv
import glob
import os
import sys

d, a, b = sys.argv[1:4]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "*_*.tsv"))):
    cfg, name = os.path.basename(f).split("_", 1)
    if cfg not in (a, b):
        continue
    for r in csv.DictReader(open(f), delimiter="\t"):
        rows.setdefault((name.rsplit(".", 1)[0], r["source"], r["bucket"]), {})[cfg] = r
print(f"file source bucket n_out M nf gflop choice_{a} choice_{b} plain_{a} plain_{b} auto_{a} "
      f"auto_{b} roof_{a} roof_{b} diff_{b}")
for key, c in rows.items():
    if a in c and b in c:
        x, y = c[a], c[b]
        print(*key, x["n_out"], x["M"], x["nf"], x["gflop"], x["choice"], y["choice"],
              x["t_plain_ms"], y["t_plain_ms"], x["t_auto_ms"], y["t_auto_ms"],
              x["roof_frac_auto"], y["roof_frac_auto"], y["max_rel_diff"])
