#!/usr/bin/env python3
"""`kinfer batch` on a GPU machine: the same manifest of `pe` jobs on large networks run
  single    as single commands one after another (`kinfer pe --device auto`, one process each),
  gpus=G    as one batch seeing G GPUs (CUDA_VISIBLE_DEVICES), for each G of --gpus,
  noshare   as one batch on all GPUs with --no-share (one process per job, no device workers),
  mpiN      with --mpi N: as `mpirun -np N kinfer batch` (every rank sees every GPU: the batch deals
            a host's GPUs to its ranks), beside the one-process batch on all GPUs,
side by side in one run on one machine, every answer checked against the first way's (and mpiN's
also against the one-process batch on all GPUs: how many are identical, the largest difference).

Each way starts with an empty order cache (its own folder), so every network's order is searched
once per way, as for a user's first batch. The table (TSV) has per way the wall time, the jobs'
own seconds summed (what they report), and the largest difference of log10 P(e) from `single`.

  scripts/bench_batch_devices.py --networks DIR --names linkage_11,linkage_12 --copies 8
                                 --gpus 1,4|all [--kinfer build/apps/kinfer] [--out DIR]
                                 [--no-single] [--no-noshare] [--cpu-reference]
                                 [--mpi N [--mpirun "mpirun --oversubscribe --bind-to none"]]

--mpirun is the launcher without -np (split like a shell line; --allow-run-as-root is added to the
default under root). On a machine without Open MPI, source the bundle of scripts/mpi-bundle.sh
first (docs/cluster.md "A machine without Open MPI").

With --lod N the manifest is instead N `lod` analyses on simulated families (scripts/
bench_linkage.py's gene dropper: 10-60 people, 10-40 markers 2 cM apart, mostly multipoint
every 2 cM across the map, a quarter two-point), run as a batch on every GPU and with
--gpu-jobs 0 (the CPU cores alone), the total ln L of every evaluation compared.

--kinfer may be a command with arguments (e.g. ".device-bundle/run apps/kinfer").
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time


def gpu_count():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return len([l for l in r.stdout.splitlines() if l.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 0


def network_file(dirs, name):
    """NAME.uai or NAME.uai.gz in the first of the comma-separated folders that has it."""
    for d in dirs.split(","):
        for cand in (name + ".uai", name + ".uai.gz"):
            if os.path.exists(os.path.join(d, cand)):
                return os.path.join(d, cand)
    raise FileNotFoundError(f"{name}.uai(.gz) in {dirs}")


def where_counts(out):
    """Jobs per `where` (host:rank[:gpuN]) in a batch's summary.tsv."""
    counts = {}
    if not os.path.exists(os.path.join(out, "summary.tsv")):
        return counts
    with open(os.path.join(out, "summary.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(head, line.rstrip("\n").split("\t")))
            counts[row["where"]] = counts.get(row["where"], 0) + 1
    return counts


def keep_batch_files(dest, way, out, log):
    """The batch's log (its per-job lines, the wall against the ideal) and its jobs' results (each
    job's read/plan/compute split) under DEST/batch-WAY/, to see where the wall went."""
    keep = os.path.join(dest, "batch-" + way)
    shutil.rmtree(keep, ignore_errors=True)
    os.makedirs(keep)
    with open(os.path.join(keep, "batch.log"), "w") as f:
        f.write(log)
    if os.path.isdir(os.path.join(out, "results")):
        shutil.copytree(os.path.join(out, "results"), os.path.join(keep, "results"))


def schedule_note(batch_json):
    """The batch's own wall against the ideal schedule of its jobs' seconds (its --json)."""
    try:
        j = json.loads(batch_json)
        return (f"batch wall {j['wall_seconds']:.2f} s, ideal {j['ideal_seconds']:.2f} s "
                f"({j['wall_seconds'] / max(j['ideal_seconds'], 1e-9):.2f}x), "
                f"{j.get('order_searches', 0)} order searches ahead")
    except (ValueError, KeyError, TypeError):
        return "no batch JSON"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinfer", default="build/apps/kinfer")
    ap.add_argument("--networks", help="folders (comma-separated) of NAME.uai[.gz] and NAME.uai.evid")
    ap.add_argument("--names", help="comma-separated network names")
    ap.add_argument("--lod", type=int, default=0, help="a manifest of this many lod analyses instead")
    ap.add_argument("--lod-people", default="10:60", help="family sizes MIN:MAX (--lod)")
    ap.add_argument("--lod-markers", default="10:40", help="marker counts MIN:MAX (--lod)")
    ap.add_argument("--lod-ways", default="gpus,cpu-only",
                    help="which batches of the lod manifest to run, in order (--lod): gpus (every "
                         "GPU), cpu-only (--gpu-jobs 0)")
    ap.add_argument("--lod-max-bits", type=int, default=0,
                    help="draw again a family whose pedigree has more inheritance bits (2n - f) "
                         "than this (--lod; 0: no limit)")
    ap.add_argument("--copies", type=int, default=8, help="jobs per network")
    ap.add_argument("--gpus", default="1",
                    help="comma-separated GPU counts to run the batch with (all: every GPU)")
    ap.add_argument("--out", default="bench/out/batch-devices")
    ap.add_argument("--no-single", action="store_true", help="skip the single commands")
    ap.add_argument("--no-noshare", action="store_true", help="skip the --no-share batch")
    ap.add_argument("--lod-timeout", type=float, default=0,
                    help="seconds each lod batch may run (0: no limit); a batch past it is stopped and "
                         "its finished jobs counted")
    ap.add_argument("--cpu-reference", action="store_true",
                    help="also run each network once with --device cpu and compare every way with it")
    ap.add_argument("--mpi", type=int, default=0,
                    help="also run the batch as N MPI ranks (mpirun -np N), beside one process on all GPUs")
    ap.add_argument("--mpirun", default=None,
                    help='the launcher, without -np (default "mpirun --oversubscribe --bind-to none", '
                         'with --allow-run-as-root under root)')
    a = ap.parse_args()
    kinfer = shlex.split(a.kinfer)
    if a.mpirun is None:
        a.mpirun = "mpirun --oversubscribe --bind-to none" + (" --allow-run-as-root" if os.geteuid() == 0 else "")
    mpirun = shlex.split(a.mpirun)
    if a.mpi and not shutil.which(mpirun[0]):
        sys.exit(f"--mpi: no {mpirun[0]} on PATH (Open MPI, or source the bundle's env.sh: scripts/mpi-bundle.sh)")
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kinfer-batch-devices-")
    if a.lod:
        if a.mpi:
            sys.exit("--mpi runs the pe manifest (--names), not --lod")
        return lod_suite(a, kinfer, work)
    jobs = []
    for name in a.names.split(","):
        src = network_file(a.networks, name)
        net = os.path.join(work, os.path.basename(src))
        shutil.copy(src, net)
        ev = os.path.join(os.path.dirname(src), name + ".uai.evid")
        evid = ""
        if os.path.exists(ev):
            evid = os.path.join(work, name + ".uai.evid")
            shutil.copy(ev, evid)
        for k in range(a.copies):
            jobs.append((f"{name}-{k}", net, evid))
    # largest networks interleaved, as a lab's manifest would list them
    jobs.sort(key=lambda j: (int(j[0].rsplit("-", 1)[1]), j[0]))
    manifest = os.path.join(work, "jobs.tsv")
    with open(manifest, "w") as f:
        f.write("id\tkind\tnetwork\tevidence\toptions\n")
        for i, net, ev in jobs:
            f.write(f"{i}\tpe\t{net}\t{ev}\t\n")
    total_gpus = gpu_count()
    print(f"machine: {os.cpu_count()} cores, {total_gpus} GPU(s); {len(jobs)} jobs", flush=True)

    rows, answers = [], {}
    if a.cpu_reference:  # the CPU's answer per network, copied to every job of it
        per_net, res = {}, {}
        t0 = time.time()
        for i, net, ev in jobs:
            if net not in per_net:
                cmd = kinfer + ["pe", net, "--json", "-q", "--device", "cpu", "--order-cache", "none"]
                if ev:
                    cmd += ["-e", ev]
                r = subprocess.run(cmd, capture_output=True, text=True)
                per_net[net] = json.loads(r.stdout)["log10_pr"] if r.returncode == 0 else None
            res[i] = per_net[net]
        answers["reference"] = res
        rows.append(("cpu-reference", 0, f"{time.time() - t0:.2f}", len(per_net), len(per_net), "0",
                     "each network once, --device cpu"))
        print("\t".join(str(x) for x in rows[-1]), flush=True)

    def record(way, gpus, wall, res, extra=""):
        answers[way] = res
        ref = answers.get("reference")
        diff = 0.0
        if ref is not None:
            for i in ref:
                if i in res and res[i] is not None and ref[i] is not None:
                    diff = max(diff, abs(res[i] - ref[i]))
                else:
                    diff = float("inf")
        else:
            answers["reference"] = res
        ok = sum(1 for v in res.values() if v is not None)
        rows.append((way, gpus, f"{wall:.2f}", ok, len(jobs), f"{diff:.3g}", extra))
        print("\t".join(str(x) for x in rows[-1]), flush=True)

    if not a.no_single:
        cache = os.path.join(work, "cache-single")
        res = {}
        t0 = time.time()
        for i, net, ev in jobs:
            cmd = kinfer + ["pe", net, "--json", "-q", "--order-cache", cache]
            if ev:
                cmd += ["-e", ev]
            r = subprocess.run(cmd, capture_output=True, text=True)
            res[i] = json.loads(r.stdout)["log10_pr"] if r.returncode == 0 else None
        record("single", total_gpus, time.time() - t0, res)

    def batch(way, gpus, extra_args, launcher=(), against=None):
        out = os.path.join(work, "out-" + way)
        env = dict(os.environ)
        if gpus < total_gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in range(gpus))
        if launcher:  # Open MPI's own refusals and container trouble (docs/cluster.md)
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        t0 = time.time()
        r = subprocess.run(list(launcher) + kinfer + ["batch", manifest, "--out", out, "--json"]
                           + extra_args, capture_output=True, text=True, env=env)
        wall = time.time() - t0
        keep_batch_files(a.out, way, out, r.stderr)
        if r.returncode != 0:
            sys.stderr.write(f"{way}: exit {r.returncode}\n{r.stderr[-2000:]}\n")
        res, own, cached = {}, 0.0, 0
        for i, _, _ in jobs:
            p = os.path.join(out, "results", i + ".json")
            if os.path.exists(p):
                with open(p) as f:
                    j = json.load(f)
                res[i] = j.get("log10_pr")
                own += j.get("seconds", 0.0)
                cached += j.get("order", {}).get("heuristic", "").startswith("cached")
            else:
                res[i] = None
        notes = (f"own {own:.2f} s; {schedule_note(r.stdout)}; {cached} jobs found their order cached; "
                 f"where {where_counts(out)}; exit {r.returncode}")
        if launcher:  # one batch of N ranks prints one summary; a build without MPI, N batches
            try:
                ranks = json.loads(r.stdout)["ranks"]
            except (ValueError, KeyError, TypeError):
                ranks = "?"
            notes = f"ranks {ranks}; " + notes
            if ranks != a.mpi:
                print(f"{way}: the batch saw {ranks} rank(s), not {a.mpi}: is kinfer built with "
                      "-Dmpi=enabled and its libmpi the launcher's?", flush=True)
        if against is not None:  # every answer against another way's, bit for bit
            other = answers[against]
            same = sum(1 for i in res if res[i] is not None and res[i] == other.get(i))
            diff = max((abs(res[i] - other[i]) if res[i] is not None and other.get(i) is not None
                        else float("inf")) for i in res)
            notes = (f"against {against} (wall {walls[against]:.2f} s): {same}/{len(jobs)} answers "
                     f"identical, max |diff| {diff:.3g}; " + notes)
            print(f"{way} against {against}: {'every answer agrees' if same == len(jobs) else 'ANSWERS DIFFER'}",
                  flush=True)
        walls[way] = wall
        record(way, gpus, wall, res, notes)
        if os.path.exists(os.path.join(out, "summary.tsv")):
            shutil.copy(os.path.join(out, "summary.tsv"), os.path.join(a.out, f"summary-{way}.tsv"))

    walls = {}
    counts = [total_gpus if x.strip() == "all" else int(x) for x in a.gpus.split(",") if x.strip()]
    if a.mpi and total_gpus not in counts:  # the one-process batch the ranks are compared with
        counts.append(total_gpus)
    for g in counts:
        if g <= total_gpus or total_gpus == 0:
            batch(f"gpus{g}", g, [])
    if a.mpi:
        batch(f"mpi{a.mpi}", total_gpus, [], mpirun + ["-np", str(a.mpi)], against=f"gpus{total_gpus}")
    if not a.no_noshare:
        batch("noshare", total_gpus, ["--no-share"])
    with open(os.path.join(a.out, "results.tsv"), "w") as f:
        f.write("way\tgpus\twall_s\tok\tjobs\tmax_abs_diff_log10\tnotes\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    shutil.rmtree(work, ignore_errors=True)


def inheritance_bits(people):
    """A pedigree's inheritance vector bits as `kinfer lod --bits` counts them: 2n - f."""
    founders = sum(1 for p in people if not p['fa'])
    return 2 * (len(people) - founders) - founders


def lod_suite(a, kinfer, work):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import random
    import bench_linkage  # the gene dropper (standard library only)
    rng = random.Random(11)
    lo_p, hi_p = (int(x) for x in a.lod_people.split(":"))
    lo_m, hi_m = (int(x) for x in a.lod_markers.split(":"))
    manifest = os.path.join(work, "lod.tsv")
    with open(manifest, "w") as f:
        f.write("id\tkind\tped\tdat\toptions\n")
        for i in range(a.lod):
            while True:  # a family above --lod-max-bits is drawn again
                size = rng.randint(lo_p, hi_p)
                markers = rng.randint(lo_m, hi_m)
                dat, peds = bench_linkage.simulate(rng, rng.randint(1, 3), size, markers, 4, 0, 2.0)
                if not a.lod_max_bits or max(inheritance_bits(p) for p in peds) <= a.lod_max_bits:
                    break
            d, p = os.path.join(work, f"f{i}.dat"), os.path.join(work, f"f{i}.ped")
            with open(d, "w") as g:
                g.write(dat)
            with open(p, "w") as g:
                g.write(bench_linkage.post_makeped(peds, breakers=False))
            opts = "" if i % 4 == 3 else f"--program linkmap --positions 0:{2 * (markers - 1)}:2"
            f.write(f"lod{i}\tlod\t{p}\t{d}\t{opts}\n")
    total_gpus = gpu_count()
    print(f"machine: {os.cpu_count()} cores, {total_gpus} GPU(s); {a.lod} lod jobs", flush=True)
    rows, ref = [], None
    ways = {"gpus": [], "cpu-only": ["--gpu-jobs", "0"]}
    for way in a.lod_ways.split(","):
        extra = ways[way]
        out = os.path.join(work, "out-" + way)
        t0 = time.time()
        try:
            r = subprocess.run(kinfer + ["batch", manifest, "--out", out, "--json"] + extra,
                               capture_output=True, text=True, timeout=a.lod_timeout or None)
        except subprocess.TimeoutExpired as e:  # the batch is interrupted; what it finished counts
            r = subprocess.CompletedProcess(e.cmd, 124, "", (e.stderr or b"").decode(errors="replace"))
        wall = time.time() - t0
        keep_batch_files(a.out, "lod-" + way, out, r.stderr)
        res, ok = {}, 0
        for i in range(a.lod):
            pth = os.path.join(out, "results", f"lod{i}.json")
            if os.path.exists(pth):
                with open(pth) as g:
                    res[i] = [e["total"]["ln_l"] for e in json.load(g)["evaluations"]]
                ok += 1
        diff = 0.0
        if ref is not None:
            for i in ref:
                if i not in res or len(res[i]) != len(ref[i]):
                    diff = float("inf")
                    continue
                for x, y in zip(res[i], ref[i]):
                    if isinstance(x, float) and isinstance(y, float):
                        diff = max(diff, abs(x - y) / max(1.0, abs(y)))
        else:
            ref = res
        rows.append((way, total_gpus if way == "gpus" else 0, f"{wall:.2f}", ok, a.lod, f"{diff:.3g}",
                     f"{schedule_note(r.stdout)}; where {where_counts(out)}; exit {r.returncode}"))
        print("\t".join(str(x) for x in rows[-1]), flush=True)
        shutil.copy(os.path.join(out, "summary.tsv"), os.path.join(a.out, f"summary-lod-{way}.tsv"))
    with open(os.path.join(a.out, "results-lod.tsv"), "w") as f:
        f.write("way\tgpus\twall_s\tok\tjobs\tmax_rel_diff_ln_l\tnotes\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
