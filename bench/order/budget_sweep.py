#!/usr/bin/env python3
"""The order search's answer against its budget, over seeds (`scripts/bench.py order-sweep`).

  budget_sweep.py LABEL ORDER_BENCH [--seeds N] [--budgets 0.5,1,...] [--data DIR] NETWORK...

A NETWORK is a path, or a name looked up as NAME.uai[.gz] in --data (default: the repository's
data/uai) and its large/ folder.

Runs ORDER_BENCH (bench/order/order_bench) on one thread per run, two runs at a time, and
prints per network the mean (min-max) log2 total state over seeds 1..N at each budget, both in
nominal core-seconds of counted work ("w") and in seconds of the one thread ("s", i.e. CPU
time). A binary with --trajectory is run once per seed at the largest budget (the answer at a
smaller budget is the one after the first round that reached it); one without is run once per
budget (then "s" is its whole run's time, so the columns are at the run's own time).
"""
import argparse
import concurrent.futures as cf
import json
import os
import statistics
import subprocess

p = argparse.ArgumentParser()
p.add_argument("label")
p.add_argument("order_bench")
p.add_argument("networks", nargs="+")
p.add_argument("--seeds", type=int, default=16)
p.add_argument("--budgets", default="0.5,1,1.5,2,3")
p.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                          "data", "uai"))
a = p.parse_args()
budgets = [float(b) for b in a.budgets.split(",")]
has_traj = "--trajectory" in subprocess.run([a.order_bench, "--help"], capture_output=True,
                                            text=True).stdout


def path_of(net):
    if os.path.isfile(net):
        return net
    for d in (a.data, os.path.join(a.data, "large")):
        for cand in (net + ".uai", net + ".uai.gz"):
            if os.path.isfile(os.path.join(d, cand)):
                return os.path.join(d, cand)
    raise SystemExit(f"no network {net} in {a.data}")


def bench(net, seed, budget, traj):
    cmd = [a.order_bench, path_of(net), "--seed", str(seed), "--budget", str(budget),
           "--fraction", "1e9", "--threads", "1"] + (["--trajectory"] if traj else [])
    return json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                     check=True).stdout.splitlines()[-1])


def run(net, seed):
    at = {}
    if has_traj:  # one run; its rounds give every budget, in work and in seconds
        traj = bench(net, seed, 1.6 * max(budgets), True)["trajectory"]
        for col, key in ((0, "w"), (1, "s")):
            for b in budgets:
                at[(key, b)] = next((r[2] for r in traj if r[col] >= b), traj[-1][2])
    else:
        runs = [(b, bench(net, seed, b, False)) for b in budgets]
        for b, j in runs:
            at[("w", b)] = j["log2_total_state"]
        for b in budgets:  # the best run that took at most b seconds
            ok = [j["log2_total_state"] for _, j in runs if j["seconds"] <= b]
            at[("s", b)] = min(ok) if ok else float("nan")
    return net, at


jobs = [(n, s) for n in a.networks for s in range(1, a.seeds + 1)]
with cf.ThreadPoolExecutor(2) as ex:
    out = list(ex.map(lambda j: run(*j), jobs))
for n in a.networks:
    rows = [r for nn, r in out if nn == n]
    for key in ("w", "s"):
        line = f"{a.label:10s} {n:11s} {key}"
        for b in budgets:
            v = [r[(key, b)] for r in rows if r[(key, b)] == r[(key, b)]]
            line += f"  {b:g}: {statistics.mean(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else f"  {b:g}: -"
        print(line, flush=True)
