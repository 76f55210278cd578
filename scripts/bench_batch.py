#!/usr/bin/env python3
"""Benchmark of `kinfer batch`: N jobs as one batch vs the same jobs run one after another with
the single commands, side by side in one run.

`scripts/bench.py batch` runs both benchmarks below.

Jobs (default 200): about three quarters `pe` jobs on the bundled UAI instances (data/uai) in
turn, each repeat either with the network's own evidence (same structure: the batch shares its
compiled plan) or with a random tenth of its observations dropped (another structure), and one
quarter `lod` jobs on linkage data sets simulated with scripts/bench_linkage.py's gene dropper
(2 pedigrees of 10-16 people, 3-4 markers, a grid of 11 thetas).

Three ways, same jobs, same answers checked:
  single   `kinfer pe` / `kinfer lod` one after another (what a user would script)
  noshare  `kinfer batch --no-share`: one process per job, --jobs N at once
  batch    `kinfer batch`: jobs of one network share its compiled plan in a worker process

  scripts/bench_batch.py [--jobs-total 200] [--kinfer build/apps/kinfer] [--label NAME]
                         [--data DIR] [--out-dir bench/out/batch]

Writes OUT_DIR/results-<label>.tsv (one row per way) and prints the table.

  scripts/bench_batch.py --repeats [--kinfer ...] [--label NAME]

Where shared plans pay: 40 jobs of one network (its own evidence) for a few cheap networks, batch
with shared plans vs --no-share, best of 3; writes OUT_DIR/results-<label>-repeats.tsv."""
import argparse
import glob
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_linkage  # noqa: E402  (simulate, post_makeped: standard library only)


def make_jobs(a, work):
    rng = random.Random(7)
    nets = []
    for path in sorted(glob.glob(os.path.join(a.data, "uai", "*.uai*"))):
        if path.endswith(".evid"):
            continue
        base = os.path.basename(path)
        shutil.copy(path, work)
        ev = os.path.join(a.data, "uai", base.replace(".gz", "") + ".evid")
        nets.append((base, ev if os.path.exists(ev) else None))
    n_lod = a.jobs_total // 4
    n_pe = a.jobs_total - n_lod
    jobs = []
    for i in range(n_pe):
        net, ev = nets[i % len(nets)]
        evid = ""
        if ev and i >= len(nets) and rng.random() < 0.5:
            # the same observations less a random tenth (always valid; another reduced structure)
            toks = open(ev).read().split()
            if toks and toks[0] != "0":
                k = int(toks[0])
                pairs = [(toks[1 + 2 * j], toks[2 + 2 * j]) for j in range(k)]
                kept = [p for p in pairs if rng.random() >= 0.1]
                evid = f"ev{i}.evid"
                with open(os.path.join(work, evid), "w") as f:
                    f.write(str(len(kept)) + "".join(f" {var} {val}" for var, val in kept) + "\n")
        jobs.append(dict(id=f"pe{i:03d}", kind="pe", network=net, evidence=evid))
    for i in range(n_lod):
        r = random.Random(f"lod-{i}")
        size = r.choice([10, 12, 14, 16])
        dat, peds = bench_linkage.simulate(r, 2, size, r.choice([3, 4]), 4, 0, 5.0)
        d, p = f"lod{i:03d}.dat", f"lod{i:03d}.ped"
        open(os.path.join(work, d), "w").write(dat)
        open(os.path.join(work, p), "w").write(bench_linkage.post_makeped(peds, breakers=False))
        jobs.append(dict(id=f"lod{i:03d}", kind="lod", ped=p, dat=d, options="--theta 0:0.5:0.05"))
    random.Random(11).shuffle(jobs)  # a lab's manifest is not sorted by network
    with open(os.path.join(work, "manifest.tsv"), "w") as f:
        f.write("id\tkind\tnetwork\tevidence\tped\tdat\toptions\n")
        for j in jobs:
            f.write("\t".join(j.get(k, "") for k in ("id", "kind", "network", "evidence", "ped", "dat", "options")) + "\n")
    return jobs


def answer(res):
    """The answer to compare: log10 P(e), or every evaluation's total LOD."""
    if "log10_pr" in res:
        return res["log10_pr"]
    return [round(e["total"]["lod"], 9) for e in res.get("evaluations", [])]


def same(x, y):
    if isinstance(x, float) and isinstance(y, float):
        return abs(x - y) < 1e-9
    return x == y


def write_rows(rows, a):
    """Writes the rows so far (after every way: a run cut short keeps what it measured)."""
    t_single = next((r["seconds"] for r in rows if r["way"] == "single"), None)
    for r in rows:
        r["ratio_single_over_this"] = round(t_single / r["seconds"], 2) if t_single else "-"
        r.setdefault("date", time.strftime("%Y-%m-%d %H:%M"))
    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, f"results-{a.label}.tsv")
    with open(path + ".tmp", "w") as f:
        f.write("\t".join(rows[0]) + "\n")
        for r in rows:
            f.write("\t".join(str(v) for v in r.values()) + "\n")
    os.replace(path + ".tmp", path)
    return path


def repeats(a):
    work = tempfile.mkdtemp(prefix="kinfer-bench-batch-rep-")
    rows = []
    for net in ("Pedigree_11.uai", "Pedigree_13.uai", "Segmentation_12.uai.gz", "pedigree1.uai.gz", "CSP_12.uai"):
        src = os.path.join(a.data, "uai", net)
        if not os.path.exists(src):
            continue
        shutil.copy(src, work)
        ev = os.path.join(a.data, "uai", net.replace(".gz", "") + ".evid")
        if os.path.exists(ev):
            shutil.copy(ev, os.path.join(work, net + ".evid"))
        m = os.path.join(work, "m.tsv")
        with open(m, "w") as f:
            f.write("id\tkind\tnetwork\n" + "".join(f"j{i}\tpe\t{net}\n" for i in range(40)))
        best = {}
        for _ in range(3):
            for way, extra in (("noshare", ["--no-share"]), ("batch", [])):
                out = os.path.join(work, "out")
                shutil.rmtree(out, ignore_errors=True)
                cmd = [a.kinfer, "batch", m, "--out", out, "-q", "--json"] + extra
                if a.concurrency:
                    cmd += ["--jobs", str(a.concurrency)]
                t0 = time.time()
                r = subprocess.run(cmd, capture_output=True, text=True)
                t = time.time() - t0
                summ = json.loads(r.stdout)
                if way not in best or t < best[way][0]:
                    best[way] = (t, summ["ok"], summ["plans_shared"])
        rows.append(dict(label=a.label, network=net, jobs=40, cores=os.cpu_count(),
                         noshare_s=round(best["noshare"][0], 3), batch_s=round(best["batch"][0], 3),
                         ratio_noshare_over_batch=round(best["noshare"][0] / best["batch"][0], 2),
                         ok=f"{best['noshare'][1]}/{best['batch'][1]}", plans_shared=best["batch"][2],
                         date=time.strftime("%Y-%m-%d %H:%M")))
        print(rows[-1], flush=True)
    path = os.path.join(a.out_dir, f"results-{a.label}-repeats.tsv")
    with open(path, "w") as f:
        f.write("\t".join(rows[0]) + "\n" + "".join("\t".join(str(v) for v in r.values()) + "\n" for r in rows))
    print(open(path).read())
    shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs-total", type=int, default=200)
    ap.add_argument("--kinfer", default=os.path.join(ROOT, "build", "apps", "kinfer"))
    ap.add_argument("--label", default=socket.gethostname())
    ap.add_argument("--data", default=os.path.join(ROOT, "data"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "out", "batch"))
    ap.add_argument("--concurrency", type=int, default=0, help="--jobs of the batch (default: cores)")
    ap.add_argument("--ways", default="single,noshare,batch")
    ap.add_argument("--repeats", action="store_true", help="the repeated-network benchmark instead")
    a = ap.parse_args()
    if a.repeats:
        return repeats(a)
    work = tempfile.mkdtemp(prefix="kinfer-bench-batch-")
    jobs = make_jobs(a, work)
    rows = []
    single = {}
    commit = os.environ.get("KINFER_COMMIT") or subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    base = dict(label=a.label, commit=commit, jobs=len(jobs), pe=sum(j["kind"] == "pe" for j in jobs),
                lod=sum(j["kind"] == "lod" for j in jobs), cores=os.cpu_count())
    ways = a.ways.split(",")
    if "single" in ways:
        t0 = time.time()
        for j in jobs:
            if j["kind"] == "pe":
                cmd = [a.kinfer, "pe", "-q", "--json", os.path.join(work, j["network"])]
                if j["evidence"]:
                    cmd += ["-e", os.path.join(work, j["evidence"])]
            else:
                cmd = [a.kinfer, "lod", "-q", "--json", "--ped", os.path.join(work, j["ped"]),
                       "--dat", os.path.join(work, j["dat"])] + j["options"].split()
            r = subprocess.run(cmd, capture_output=True, text=True)
            single[j["id"]] = answer(json.loads(r.stdout)) if r.returncode == 0 else f"exit {r.returncode}"
        t = time.time() - t0
        failed = sum(isinstance(v, str) for v in single.values())
        rows.append(dict(base, way="single", seconds=round(t, 2), ok=len(jobs) - failed, failed=failed,
                         answers_agree="-", plans_shared="-", gpu_jobs="-", exit=0))
        print(rows[-1], flush=True)
        write_rows(rows, a)
    t_single = rows[0]["seconds"] if rows else None
    for way in ("noshare", "batch"):
        if way not in ways:
            continue
        out = os.path.join(work, "out-" + way)
        cmd = [a.kinfer, "batch", os.path.join(work, "manifest.tsv"), "--out", out, "--json"]
        if way == "noshare":
            cmd.append("--no-share")
        if a.concurrency:
            cmd += ["--jobs", str(a.concurrency)]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        t = time.time() - t0
        try:
            summ = json.loads(r.stdout)
        except ValueError:
            summ = dict(ok=0, failed=len(jobs), plans_shared=0)
            print(r.stderr[-2000:])
        agree, gpu = 0, 0
        for j in jobs:
            p = os.path.join(out, "results", j["id"] + ".json")
            if os.path.exists(p):
                res = json.load(open(p))
                gpu += "gpu" in res.get("device", "")
                agree += same(answer(res), single.get(j["id"]))
            elif isinstance(single.get(j["id"]), str):
                agree += 1  # failed both ways
        rows.append(dict(base, way=way, seconds=round(t, 2), ok=summ["ok"], failed=summ["failed"],
                         answers_agree=f"{agree}/{len(jobs)}" if single else "-",
                         plans_shared=summ.get("plans_shared", 0), gpu_jobs=gpu, exit=r.returncode))
        print(rows[-1], flush=True)
        write_rows(rows, a)
    path = write_rows(rows, a)
    print(open(path).read())
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
