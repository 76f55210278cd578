#!/usr/bin/env python3
"""`kinfer` under `mpirun --oversubscribe -np 2` (Open MPI): pe with a forced small --max-memory
(several slices) and lod give one process's answers; a batch runs every job once on both ranks
with the single commands' answers; SIGKILL to mpirun then --resume completes it with no finished
job redone; a job process killed mid-batch is run again. Exit 77 (SKIP) when kinfer was built
without MPI or mpirun is missing. Run by meson with KINFER_EXE, KINFER_DATA and KINFER_MPI set."""
import gzip
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from support import EXE, DATA, batch_with_a_worker_killed, check, finish, network, references

if os.environ.get("KINFER_MPI") != "1" or not shutil.which("mpirun"):
    print("SKIP: kinfer built without MPI, or no mpirun")
    sys.exit(77)
# CI runs as root and has 2 cores.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none")  # containers forbid CMA (ptrace)
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"]


def run(args, mpi=False, **kw):
    return subprocess.run((MPIRUN if mpi else []) + [EXE] + args, capture_output=True, text=True,
                          env=ENV, **kw)


def run_mpmd(args0, args1):
    """Rank 0 runs kinfer with args0 and rank 1 with args1 (an MPMD launch)."""
    return subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "1", EXE] + args0
                          + [":", "-np", "1", EXE] + args1, capture_output=True, text=True, env=ENV)


def scaled_network(src, dst, factor):
    """Writes the UAI network `src` (plain or gzipped) to `dst` with every table value times
    `factor`; returns the number of tables. A MARKOV network's P(e) is the product of its
    tables, so ln P(e) grows by tables x ln(factor)."""
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        tok = f.read().split()
    check(tok[0] == "MARKOV", f"{src} is a MARKOV network")
    n = int(tok[1])
    at = 2 + n
    tables = int(tok[at])
    at += 1
    for _ in range(tables):  # the scopes: a size, then that many variables
        at += 1 + int(tok[at])
    for _ in range(tables):  # the tables: a count, then that many values
        count = int(tok[at])
        for i in range(at + 1, at + 1 + count):
            tok[i] = repr(float(tok[i]) * factor)
        at += 1 + count
    with open(dst, "w") as f:
        f.write(" ".join(tok) + "\n")
    return tables


def test_pe():
    ref = references()
    args = ["pe", network("linkage_21"), "--json", "--device", "cpu", "--threads", "1",
            "--order-time", "0.5", "--max-memory", "13M"]  # 15.6 MiB unconditioned
    one, two = run(args), run(args, mpi=True)
    check(one.returncode == 0 and two.returncode == 0,
          f"pe linkage_21 --max-memory 13M: 1 process and 2 ranks exit 0 "
          f"({one.returncode}, {two.returncode})" + (f": {two.stderr[-400:]}" if two.returncode else ""))
    if one.returncode or two.returncode:
        return
    a, b = json.loads(one.stdout), json.loads(two.stdout)  # rank 0 alone prints: one object
    slices = a["conditioning"]["slices"]
    check(slices >= 2, f"the plan is conditioned ({slices} slices)")
    check(abs(a["ln_pr"] - b["ln_pr"]) <= 1e-12 * max(1, abs(a["ln_pr"])),
          f"ln P(e) of 2 ranks equals 1 process's to 1e-12 ({b['ln_pr']!r} vs {a['ln_pr']!r})")
    value, tol = ref["linkage_21"]
    check(abs(b["log10_pr"] - value) <= tol,
          f"and the UAI reference ({b['log10_pr']:.7f} vs {value} within {tol})")
    m = b.get("mpi", {})
    per = m.get("per_rank", [])
    check(m.get("ranks") == 2 and m.get("slices") == slices and len(per) == 2
          and sum(p["slices"] for p in per) == slices and all(p["slices"] > 0 for p in per),
          f"--json mpi: 2 ranks, {slices} slices dealt to both ({per})")
    # --verify 1: every slice computed on a second rank too, and compared
    v = run(args + ["--verify", "1"], mpi=True)
    vj = json.loads(v.stdout) if v.returncode == 0 else {}
    check(v.returncode == 0 and vj["mpi"].get("verify", {}).get("recomputed") == slices
          and vj["mpi"]["verify"]["mismatches"] == 0 and vj["ln_pr"] == b["ln_pr"],
          f"--verify 1: {slices} slices recomputed on the other rank, no mismatch "
          f"({v.returncode}: {vj.get('mpi', {}).get('verify')})")
    # a verifying rank whose values are wrong: rank 1 reads a copy of the network with every
    # table doubled (the same structure, so the same plan and slices, with other values):
    # exit 5, naming the slices and both values
    with tempfile.TemporaryDirectory() as tmp:
        doubled = os.path.join(tmp, "linkage_21.uai")
        tables = scaled_network(network("linkage_21"), doubled, 2.0)
        shutil.copy(network("linkage_21")[:-len(".gz")] + ".evid", doubled + ".evid")
        d = run(["pe", doubled] + args[2:])
        dj = json.loads(d.stdout) if d.returncode == 0 else {}
        shift = dj.get("ln_pr", a["ln_pr"]) - a["ln_pr"]
        check(abs(shift - tables * math.log(2)) <= 1e-9 * max(1, abs(a["ln_pr"])),
              f"the doubled copy's ln P(e) is {tables} ln 2 more ({shift!r})")
        bad = run_mpmd(args + ["--verify", "1"], ["pe", doubled] + args[2:] + ["--verify", "1"])
    check(bad.returncode == 5 and "verify: slice" in bad.stderr and "on rank 1" in bad.stderr,
          f"--verify with a wrong rank: exit 5 naming the slices and both values ({bad.returncode})")
    # --verify in one process: nothing to compare with, said with exit 6 (as --check without a GPU)
    one_v = run(["pe", network("Pedigree_11"), "--device", "cpu", "--verify", "0.5"])
    check(one_v.returncode == 6 and "verify: not run" in one_v.stderr,
          f"pe --verify in one process: exit 6, not run ({one_v.returncode})")
    # rank 0 plans and the other ranks build its plan (no search there): a rank 1 whose own search
    # would find another order (another heuristic) still computes rank 0's slices
    mpmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "1", EXE] + args + [":",
            "-np", "1", EXE] + args + ["--order", "minfill"]
    d = subprocess.run(mpmd, capture_output=True, text=True, env=ENV)
    dj = json.loads(d.stdout) if d.returncode == 0 else {}
    check(d.returncode == 0 and abs(dj["ln_pr"] - a["ln_pr"]) <= 1e-12 * max(1, abs(a["ln_pr"]))
          and dj["conditioning"]["slices"] == slices,
          f"rank 1 asked for another order search: it builds rank 0's plan, the same answer "
          f"({d.returncode}: {dj.get('ln_pr')!r})" + (f": {d.stderr[-400:]}" if d.returncode else ""))
    # an unconditioned plan runs on rank 0
    u = run(["pe", network("Pedigree_11"), "--json", "--device", "cpu", "--threads", "1"], mpi=True)
    uj = json.loads(u.stdout) if u.returncode == 0 else {}
    per = uj.get("mpi", {}).get("per_rank", [])
    value, tol = ref["Pedigree_11"]
    check(u.returncode == 0 and abs(uj["log10_pr"] - value) <= tol and
          [p["slices"] for p in per] == [1, 0], f"unconditioned plan: rank 0 runs it ({per})")


def one_and_two(args, what):
    """Runs `args` in one process and on 2 ranks; their JSON outputs, or None (reported) when
    either failed."""
    one, two = run(args), run(args, mpi=True)
    check(one.returncode == 0 and two.returncode == 0,
          f"{what}: 1 process and 2 ranks exit 0 ({one.returncode}, {two.returncode})"
          + (f": {two.stderr[-400:]}" if two.returncode else ""))
    if one.returncode or two.returncode:
        return None
    return json.loads(one.stdout), json.loads(two.stdout)


def test_lod():
    v = os.path.join(DATA, "linkage", "variants")
    args = ["lod", "--ped", os.path.join(v, "twopoint.ped"), "--dat", os.path.join(v, "twopoint.dat"),
            "--json", "--threads", "1", "--device", "cpu", "--order", "minfill"]
    both = one_and_two(args, "lod twopoint")
    if not both:
        return
    a, b = both
    la = [(e["total"]["lod"], [p["lod"] for p in e["pedigrees"]]) for e in a["evaluations"]]
    lb = [(e["total"]["lod"], [p["lod"] for p in e["pedigrees"]]) for e in b["evaluations"]]
    check(len(la) >= 5 and la == lb, f"{len(la)} thetas x {len(la[0][1])} pedigrees: the same LODs")
    per = b.get("mpi", {}).get("per_rank", [])
    check(len(per) == 2 and all(p["likelihoods"] > 0 for p in per),
          f"both ranks computed likelihoods ({per})")


def test_lod_chain():
    """LINKMAP by the Lander-Green chain: each pedigree's chain on the rank it is dealt to,
    gathered in pedigree order: the same location scores as one process; --verify 1 recomputes
    every likelihood and chain on the other rank (a rank with other penetrances: exit 5; one
    process: exit 6)."""
    f = os.path.join(DATA, "merlin", "fastlink")
    args = ["lod", "--ped", os.path.join(f, "fastlink.linkage.pre"), "--dat",
            os.path.join(f, "fastlink.linkage.dat"), "--program", "linkmap", "--positions",
            "-5:25:5", "--json", "--threads", "1", "--device", "cpu", "--order", "minfill"]
    both = one_and_two(args, "lod linkmap (chain)")
    if not both:
        return
    a, b = both
    chain = [n for n in a.get("notes", []) if "Lander-Green" in n]
    check(chain and chain == [n for n in b.get("notes", []) if "Lander-Green" in n],
          f"the chain ran, the same note on 2 ranks ({chain})")
    la = [(e["total"]["lod"], [p["ln_l"] for p in e["pedigrees"]]) for e in a["evaluations"]]
    lb = [(e["total"]["lod"], [p["ln_l"] for p in e["pedigrees"]]) for e in b["evaluations"]]
    check(len(la) >= 5 and la == lb,
          f"{len(la)} positions x {len(la[0][1])} pedigrees: the same ln L and LODs")
    v = run(args + ["--verify", "1"], mpi=True)
    vj = json.loads(v.stdout) if v.returncode == 0 else {}
    ver = vj.get("mpi", {}).get("verify", {})
    lv = [(e["total"]["lod"], [p["ln_l"] for p in e["pedigrees"]]) for e in vj.get("evaluations", [])]
    check(v.returncode == 0 and ver.get("recomputed", 0) > 0 and ver.get("mismatches") == 0
          and lv == la, f"lod --verify 1: likelihoods recomputed on the other rank, no mismatch "
          f"({v.returncode}: {ver})")
    # a verifying rank whose values are wrong: rank 1 reads a locus file with another phenocopy
    # rate (the penetrance of the normal homozygote; the same loci and pedigrees, other
    # likelihoods)
    with tempfile.TemporaryDirectory() as tmp:
        dat = os.path.join(tmp, "other-penetrance.dat")
        with open(os.path.join(f, "fastlink.linkage.dat")) as src:
            text = src.read()
        check("\n0.001 0.86 0.86\n" in text, "the locus file's penetrances as this test knows them")
        with open(dat, "w") as w:
            w.write(text.replace("\n0.001 0.86 0.86\n", "\n0.01 0.86 0.86\n"))
        other = args[:4] + [dat] + args[5:]
        o = run(other)
        lo = [e["total"]["lod"] for e in json.loads(o.stdout)["evaluations"]] if o.returncode == 0 else []
        check(len(lo) == len(la) and lo != [e[0] for e in la],
              f"the other penetrance gives other LODs ({o.returncode})")
        bad = run_mpmd(args + ["--verify", "1"], other + ["--verify", "1"])
    check(bad.returncode == 5 and "verify: likelihood" in bad.stderr,
          f"lod --verify with a wrong rank: exit 5 with both values ({bad.returncode})")
    alone = run(args + ["--verify", "0.5"])
    check(alone.returncode == 6 and "verify: not run" in alone.stderr,
          f"lod --verify in one process: exit 6, not run ({alone.returncode})")


def write_manifest(tmp, names, copies):
    with open(os.path.join(tmp, "jobs.tsv"), "w") as f:
        f.write("id\tkind\tnetwork\toptions\n")
        jobs = []
        for i in range(copies * len(names)):
            n = names[i % len(names)]
            jobs.append((f"j{i:02d}", n))
            f.write(f"j{i:02d}\tpe\t{network(n)}\t--threads 1\n")
    return jobs


def read_summary(path):
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    return {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}


def expected(names):
    out = {}
    for n in names:
        r = run(["pe", "-q", "--json", "--threads", "1", network(n)])
        out[n] = json.loads(r.stdout)["log10_pr"]
    return out


def check_results(out, jobs, expect, what):
    s = read_summary(os.path.join(out, "summary.tsv"))
    bad = []
    for j, n in jobs:
        try:
            with open(os.path.join(out, "results", j + ".json")) as f:
                got = json.load(f)["log10_pr"]
        except (OSError, ValueError, KeyError):
            got = None
        if got is None or abs(got - expect[n]) > 1e-9 or s[j]["status"] != "ok":
            bad.append(j)
    check(not bad, f"{what}: every job's answer equals its single command's (wrong: {bad})")
    completed = open(os.path.join(out, "journal.log")).read().split()[1::2]
    check(sorted(completed) == sorted(j for j, _ in jobs),
          f"{what}: every job completed exactly once ({len(completed)} for {len(jobs)})")
    return s


def test_batch(tmp):
    names = ["Pedigree_11", "Pedigree_13", "linkage_16"]
    jobs = write_manifest(tmp, names, 2)
    expect = expected(names)
    out = os.path.join(tmp, "out")
    r = run(["batch", os.path.join(tmp, "jobs.tsv"), "--out", out, "--no-share", "--json",
             "--verify", "1"], mpi=True)
    check(r.returncode == 0, f"batch under 2 ranks: exit 0 ({r.returncode})"
          + (f": {r.stderr[-400:]}" if r.returncode else ""))
    s = check_results(out, jobs, expect, "batch under 2 ranks")
    where = {row["where"].rsplit(":", 1)[-1] for row in s.values()}
    check(where == {"0", "1"}, f"both ranks ran jobs (where column: {sorted(where)})")
    # --verify 1: every job recomputed on the other rank, the same answer
    other = all(row["verify"].startswith("same on ") and
                row["verify"].rsplit(":", 1)[-1] != row["where"].rsplit(":", 1)[-1]
                for row in s.values())
    v = json.loads(r.stdout)["verify"] if r.returncode == 0 else {}
    check(other and v.get("same") == len(jobs) and v.get("mismatches") == 0,
          f"--verify 1: every job recomputed on the other rank with the same answer ({v})")


def test_group_workers(tmp):
    """pe jobs of one network share plans in group workers on both ranks (a worker on rank 1 has
    its lines forwarded to rank 0); a worker killed mid-group (SIGKILL from the test) leaves its
    unfinished jobs to run again one by one."""
    jobs = [(f"p{i:02d}", "Pedigree_11") for i in range(8)]
    with open(os.path.join(tmp, "jobs.tsv"), "w") as f:
        f.write("id\tkind\tnetwork\toptions\n")
        for j, n in jobs:
            f.write(f"{j}\t{'pe'}\t{network(n)}\t--threads 1\n")
    expect = expected(["Pedigree_11"])
    out = os.path.join(tmp, "out")
    r, out, killed = batch_with_a_worker_killed(
        lambda out: MPIRUN + [EXE, "batch", os.path.join(tmp, "jobs.tsv"), "--out", out, "--jobs", "1",
                              "--json"], out, {j for j, _ in jobs}, env=ENV)
    check(killed is not None, f"a group worker killed (SIGKILL) midway ({killed})")
    check(r.returncode == 0, f"group workers under 2 ranks: exit 0 ({r.returncode})"
          + (f": {r.stderr[-400:]}" if r.returncode else ""))
    if r.returncode:
        return
    s = check_results(out, jobs, expect, "group workers under 2 ranks")
    summary = json.loads(r.stdout)
    where = {row["where"].rsplit(":", 1)[-1] for row in s.values()}
    check(summary["group_workers"] >= 2 and where == {"0", "1"},
          f"group workers on both ranks ({summary['group_workers']} workers, ranks {sorted(where)})")
    check("run again one by one" in r.stderr, "the killed worker's jobs ran again one by one")


def journal_count(path):
    return len(open(path).read().split()) // 2 if os.path.exists(path) else 0


def test_kill_and_resume(tmp):
    names = ["linkage_24", "linkage_21", "linkage_16"]
    jobs = write_manifest(tmp, names, 3)
    expect = expected(names)
    out = os.path.join(tmp, "out")
    journal = os.path.join(out, "journal.log")
    cmd = MPIRUN + [EXE, "batch", os.path.join(tmp, "jobs.tsv"), "--out", out, "--jobs", "1",
                    "--no-share"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None and journal_count(journal) < 2:
        time.sleep(0.05)
    midway = p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait()
    time.sleep(1)  # the ranks and their children go with mpirun
    before = open(journal).read().split()[1::2] if os.path.exists(journal) else []
    check(midway and 0 < len(before) < len(jobs),
          f"mpirun killed with SIGKILL midway ({len(before)} of {len(jobs)} done)")
    stamps = {j: os.stat(os.path.join(out, "results", j + ".json")).st_mtime_ns for j in before}
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, env=ENV)
    check(r.returncode == 0, f"--resume under mpirun completes (exit {r.returncode})"
          + (f": {r.stderr[-300:]}" if r.returncode else ""))
    check_results(out, jobs, expect, "kill then resume")
    untouched = all(os.stat(os.path.join(out, "results", j + ".json")).st_mtime_ns == t
                    for j, t in stamps.items())
    check(untouched, "results finished before the kill are untouched")


def job_processes(out):
    """pids of the batch's job processes (children of the ranks): kinfer pe with this order cache."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 2 and argv[1] == b"pe" and os.path.join(out, "order-cache").encode() in argv:
            pids.append(int(d))
    return pids


def test_worker_killed(tmp):
    names = ["linkage_24", "linkage_21"]
    jobs = write_manifest(tmp, names, 3)
    expect = expected(names)
    out = os.path.join(tmp, "out")
    cmd = MPIRUN + [EXE, "batch", os.path.join(tmp, "jobs.tsv"), "--out", out, "--jobs", "1",
                    "--no-share"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, text=True)
    killed = None
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None and killed is None:
        pids = job_processes(out)
        if pids:
            time.sleep(0.1)
            try:
                os.kill(pids[-1], signal.SIGKILL)
                killed = pids[-1]
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    _, err = p.communicate(timeout=600)
    check(killed is not None and p.returncode == 0,
          f"a job process killed mid-batch (pid {killed}): the batch still exits 0 ({p.returncode})")
    check("was killed (signal 9)" in err, "the killed job was run again")
    check_results(out, jobs, expect, "job process killed")


test_pe()
test_lod()
test_lod_chain()
for t in (test_batch, test_group_workers, test_kill_and_resume, test_worker_killed):
    with tempfile.TemporaryDirectory() as tmp:
        t(tmp)
finish()
