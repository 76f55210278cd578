#!/usr/bin/env python3
"""bench/order/results.tsv (from run.sh) -> the Markdown table of bench/order/RESULTS.md."""
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1] if len(sys.argv) > 1 else "bench/order/results.tsv"),
                           delimiter="\t"))
nets = list(dict.fromkeys(r["network"] for r in rows))


def get(n, v, t, run="1"):
    for r in rows:
        if (r["network"], r["version"], r["threads"], r["run"]) == (n, v, t, run):
            return r
    return None


def f(x, k="log2_total"):
    return x[k] if x else "-"


print("| network | before: log2 total (run 1 / run 2) | log2 max | search s | restarts "
      "| after: log2 total (run 1 / run 2 / 1 thread) | log2 max | search s | work | restarts + moves "
      "| stopped | restarts only (no annealing): log2 total |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in nets:
    b1, b2 = get(n, "before", "2"), get(n, "before", "2", "2")
    a1, a2, a_t1 = get(n, "after", "2"), get(n, "after", "2", "2"), get(n, "after", "1")
    na = get(n, "after-no-anneal", "2")
    print(f"| {n} | {f(b1)} / {f(b2)} | {f(b1, 'log2_max_table')} / {f(b2, 'log2_max_table')} "
          f"| {f(b1, 'order_s')} / {f(b2, 'order_s')} | {f(b1, 'restarts')} "
          f"| {f(a1)} / {f(a2)} / {f(a_t1)} | {f(a1, 'log2_max_table')} "
          f"| {f(a1, 'order_s')} / {f(a2, 'order_s')} / {f(a_t1, 'order_s')} | {f(a1, 'work')} "
          f"| {f(a1, 'restarts')} + {f(a1, 'moves')} | {f(a1, 'stopped_by')} "
          f"| {f(na)} ({f(na, 'restarts')} restarts, {f(na, 'order_s')} s) |")
