#!/usr/bin/env python3
"""Tables for docs/perf-notes.md from bench/gpu/run.sh results (stdlib only).

usage: summarize.py RESULTS_DIR...   (each a folder holding random.tsv, net_*.tsv, e2e*.tsv)
Prints markdown tables and writes all_buckets.tsv (every benchmarked bucket) into the first
folder, for plot.gp.
"""
import csv
import glob
import os
import statistics
import sys


def read_tsv(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def buckets(dirs):
    rows = []
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(d, "random.tsv")) + glob.glob(os.path.join(d, "net_*.tsv"))):
            for r in read_tsv(p):
                r["_file"] = os.path.relpath(p)
                rows.append(r)
    return rows


def e2e(dirs):
    out = {}
    for d in dirs:
        for p in glob.glob(os.path.join(d, "e2e*.tsv")):
            for r in read_tsv(p):
                if r.get("seconds", "").startswith("ERROR") or not r.get("seconds"):
                    continue
                dev = "cpu" if r["device"] == "cpu" and float(r["device_start"]) == 0 else "gpu"
                out.setdefault(r["network"], {}).setdefault(dev, []).append(r)
    return out


def main():
    dirs = sys.argv[1:] or ["."]
    rows = buckets(dirs)
    with open(os.path.join(dirs[0], "all_buckets.tsv"), "w") as f:
        keys = ["source", "bucket", "gflop", "t_cpu_ms", "t_plain_ms", "t_cached_ms", "t_auto_ms",
                "t_f32_ms", "roof_ms", "choice", "M", "n_out", "nf"]
        f.write("\t".join(keys) + "\n")
        for r in rows:
            f.write("\t".join(r[k] for k in keys) + "\n")

    big = sorted((r for r in rows if num(r["gflop"]) >= 1.0), key=lambda r: -num(r["gflop"]))
    print("### Buckets above 1 GFLOP\n")
    print("| bucket | outputs | M | inputs | GFLOP | CPU 16t ms | plain ms | cached ms | selected | ms | GFLOP/s | eff. GB/s | roofline | x CPU | f32 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in big:
        print(f"| {r['source']} {r['bucket']} | {r['n_out']} | {r['M']} | {r['n_in']} | {num(r['gflop']):.2f} | "
              f"{num(r['t_cpu_ms']):.1f} | {num(r['t_plain_ms']):.3f} | {num(r['t_cached_ms']):.3f} | {r['choice']} | "
              f"{num(r['t_auto_ms']):.3f} | {num(r['gflops_auto']):.0f} | {num(r['gbps_auto']):.0f} | "
              f"{num(r['roof_frac_auto']):.2f} | {num(r['speedup_cpu']):.0f} | {num(r['t_f32_ms']):.3f} |")

    print("\n### All benchmarked buckets\n")
    print("| set | buckets | median x CPU | median roofline | selector within 5% of the faster variant | mean selected/best | worst |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    groups = {}
    for r in rows:
        groups.setdefault(r["source"] if r["source"].startswith("random") else "networks", []).append(r)
    for name, g in sorted(groups.items()):
        loss = []
        for r in g:
            tp, tc, ta = num(r["t_plain_ms"]), num(r["t_cached_ms"]), num(r["t_auto_ms"])
            best = min(tp, tc) if tc == tc else tp
            loss.append(ta / best)
        print(f"| {name} | {len(g)} | {statistics.median(num(r['speedup_cpu']) for r in g):.0f} | "
              f"{statistics.median(num(r['roof_frac_auto']) for r in g):.2f} | "
              f"{sum(1 for l in loss if l < 1.05)}/{len(g)} | {statistics.mean(loss):.3f} | {max(loss):.2f} |")

    runs = e2e(dirs)
    summary = open(os.path.join(dirs[0], "e2e_summary.tsv"), "w")
    summary.write("network\tcpu_s\tgpu_s\tgpu_start_s\tgpu_compute_s\tcpu_compute_s\n")
    if runs:
        print("\n### End to end (`kinfer pe`, median of the runs; order from the cache for both)\n")
        print("| network | CPU 16t s | GPU s | ratio | GPU device start s | GPU compute without start s | compute ratio | log10 P(e) |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for n, d in runs.items():
            if "cpu" not in d or "gpu" not in d:
                continue
            cs = statistics.median(num(r["seconds"]) for r in d["cpu"])
            gs = statistics.median(num(r["seconds"]) for r in d["gpu"])
            cc = statistics.median(num(r["compute"]) for r in d["cpu"])
            start = statistics.median(num(r["device_start"]) for r in d["gpu"])
            gc = statistics.median(num(r["compute"]) - num(r["device_start"]) for r in d["gpu"])
            print(f"| {n} | {cs:.3f} | {gs:.3f} | {cs / gs:.2f} | {start:.3f} | {gc:.3f} | {cc / gc:.1f} | "
                  f"{d['gpu'][0]['log10_pr'][:10]} |")
            summary.write(f"{n}\t{cs}\t{gs}\t{start}\t{gc}\t{cc}\n")
    summary.close()


if __name__ == "__main__":
    main()
