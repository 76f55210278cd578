#!/usr/bin/env python3
"""Scaling of `mpirun -np N kinfer` against one process, on this machine's CPU cores: a pe whose
plan is forced into slices by --max-memory, and a batch of pe jobs. Prints a fixed-width table
(wall seconds, CPU seconds of all processes: user+sys, from wait4) and checks that the answers
agree. Usage: scripts/bench_mpi.py BUILD_DIR [--ranks 2] [--repeats 3] [--json OUT]"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    exe = os.path.join(a.build, "apps", "kinfer")
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(a.ranks)]
    uai = os.path.join(ROOT, "data", "uai")
    rows = []
    import resource

    def measure(name, cmd, key):
        walls, cpus, answers = [], [], []
        for _ in range(a.repeats):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
            walls.append(time.time() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if p.returncode != 0:
                sys.exit(f"{name}: exit {p.returncode}: {p.stderr[-500:]}")
            answers.append(key(p.stdout))
        rows.append({"case": name, "wall_median": statistics.median(walls), "walls": walls,
                     "cpu_median": statistics.median(cpus), "answer": answers[0]})
        print(f"{name:<44} {statistics.median(walls):8.2f} {statistics.median(cpus):8.2f}  {answers[0]}",
              flush=True)

    print(f"{'case':<44} {'wall s':>8} {'cpu s':>8}  answer")
    pe = [exe, "pe", os.path.join(uai, "linkage_14.uai.gz"), "--json", "--device", "cpu",
          "--order-time", "0.5", "--max-memory", "24M"]
    lnpr = lambda out: json.loads(out)["ln_pr"]
    measure("pe linkage_14 24M, 1 process, 1 thread", pe + ["--threads", "1"], lnpr)
    measure(f"pe linkage_14 24M, 1 process, {a.ranks} threads", pe + ["--threads", str(a.ranks)], lnpr)
    measure(f"pe linkage_14 24M, {a.ranks} ranks x 1 thread", mpirun + pe + ["--threads", "1"], lnpr)
    with tempfile.TemporaryDirectory() as tmp:
        man = os.path.join(tmp, "jobs.tsv")
        with open(man, "w") as f:
            f.write("id\tkind\tnetwork\toptions\n")
            nets = ["linkage_16.uai.gz", "linkage_21.uai.gz", "linkage_24.uai.gz", "Pedigree_13.uai",
                    "DBN_11.uai", "Pedigree_11.uai"]
            for i in range(12):
                f.write(f"j{i:02d}\tpe\t{os.path.join(uai, nets[i % len(nets)])}\t--threads 1 --order-time 0.5\n")
        n = [0]

        def batch(extra, mpi):
            n[0] += 1
            out = os.path.join(tmp, f"out{n[0]}")
            return (mpirun if mpi else []) + [exe, "batch", man, "--out", out, "--no-share",
                                              "--json"] + extra

        okjobs = lambda out: json.loads(out)["ok"]
        for label, extra, mpi in ((f"batch 12 pe jobs, 1 process, --jobs {a.ranks}", ["--jobs", str(a.ranks)], False),
                                  (f"batch 12 pe jobs, {a.ranks} ranks x --jobs 1", ["--jobs", "1"], True)):
            walls, cpus = [], []
            for _ in range(a.repeats):
                cmd = batch(extra, mpi)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.time()
                p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
                walls.append(time.time() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                if p.returncode != 0:
                    sys.exit(f"{label}: exit {p.returncode}: {p.stderr[-500:]}")
                ok = okjobs(p.stdout)
            rows.append({"case": label, "wall_median": statistics.median(walls), "walls": walls,
                         "cpu_median": statistics.median(cpus), "answer": f"{ok} ok"})
            print(f"{label:<44} {statistics.median(walls):8.2f} {statistics.median(cpus):8.2f}  {ok} ok",
                  flush=True)
    # 1 process x 1 thread and N ranks x 1 thread run the same plan: equal to 1e-12; with N
    # threads the accountant sizes the slices for N threads' scratch (other slices, rounding).
    pes = [r["answer"] for r in rows if r["case"].startswith("pe ")]
    same = abs(pes[2] - pes[0]) <= 1e-12 * abs(pes[0])
    print(f"pe: ranks equal one process to 1e-12: {same}; with {a.ranks} threads: "
          f"|diff| {abs(pes[1] - pes[0]):.3g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ranks": a.ranks, "rows": rows, "pe_answers_agree": same}, f, indent=1)
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
