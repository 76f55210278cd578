#!/usr/bin/env python3
"""Tests of `kinfer batch`: failures stay isolated, bad manifests are refused up front, a
batch killed with SIGKILL resumes to the same results without running any job twice to
completion, and mar and mpe jobs give their single commands' answers. Run by meson with KINFER_EXE and KINFER_DATA set."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from support import EXE, DATA, batch_with_a_worker_killed, check, finish


def single_pe(network):
    out = subprocess.run([EXE, "pe", "-q", "--json", network], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["log10_pr"]


def read_summary(path):
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    head = rows[0]
    return {r[0]: dict(zip(head, r)) for r in rows[1:]}


def write_jobs(tmp, columns, rows):
    """Writes the manifest tmp/jobs.tsv: a header of `columns`, then one line per row (a tuple
    of fields); returns its path."""
    path = os.path.join(tmp, "jobs.tsv")
    with open(path, "w") as f:
        f.write("\t".join(columns) + "\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    return path


def copy_net(tmp, name):
    """Copies a network (plain or .gz) and its evidence into tmp; returns the file name."""
    for cand in (name + ".uai", name + ".uai.gz"):
        src = os.path.join(DATA, "uai", cand)
        if os.path.exists(src):
            shutil.copy(src, tmp)
            if os.path.exists(os.path.join(DATA, "uai", name + ".uai.evid")):
                shutil.copy(os.path.join(DATA, "uai", name + ".uai.evid"), os.path.join(tmp, cand + ".evid"))
            return cand
    raise FileNotFoundError(name)


def test_failures_isolated(tmp):
    a = copy_net(tmp, "Pedigree_11")
    b = copy_net(tmp, "Pedigree_13")
    with open(os.path.join(tmp, "broken.uai"), "w") as f:
        f.write("MARKOV\n2\n2 2\n1\n2 0 1\n\n4\n0.1 0.2\n")  # truncated table
    jobs = write_jobs(tmp, ("id", "kind", "network", "options"),
                      [("good1", "pe", a, ""), ("bad", "pe", "broken.uai", ""),
                       ("good2", "pe", b, "--order minfill"), ("badopt", "pe", a, "--order nosuch")])
    r = subprocess.run([EXE, "batch", jobs, "--out", os.path.join(tmp, "out")], capture_output=True, text=True)
    check(r.returncode == 4, f"a failing job gives exit 4 (got {r.returncode})")
    s = read_summary(os.path.join(tmp, "out", "summary.tsv"))
    check(s["good1"]["status"] == "ok" and s["good2"]["status"] == "ok", "the good jobs complete")
    check(s["bad"]["status"] == "failed" and "broken.uai" in s["bad"]["error"] and ":8:" in s["bad"]["error"],
          "the bad job fails alone, its message names file and line: " + s["bad"]["error"])
    for job, net in (("good1", a), ("good2", b)):
        with open(os.path.join(tmp, "out", "results", job + ".json")) as f:
            got = json.load(f)["log10_pr"]
        check(abs(got - single_pe(os.path.join(tmp, net))) < 1e-9, f"{job} equals the single command's answer")
    check(not os.path.exists(os.path.join(tmp, "out", "results", "bad.json")), "no result file for the failed job")
    # job options are parsed by the single command's own definitions: refused as `kinfer pe` would
    check(s["badopt"]["status"] == "failed" and "--order" in s["badopt"]["error"] and "nosuch" in s["badopt"]["error"],
          "a job with an option value its command refuses fails alone, naming it: " + s["badopt"]["error"])


def test_bad_manifests(tmp):
    a = copy_net(tmp, "Pedigree_11")
    cases = {
        "missing_column.tsv": ("id\tnetwork\nj1\t" + a + "\n", ":1:", "kind"),
        "unknown_kind.tsv": ("id\tkind\tnetwork\nj1\tpe\t" + a + "\nj2\tfoo\t" + a + "\n", ":3:", "unknown kind"),
        "duplicate.tsv": ("id\tkind\tnetwork\nj1\tpe\t" + a + "\nj1\tpe\t" + a + "\n", ":3:", "duplicate"),
        "missing_file.tsv": ("id\tkind\tnetwork\nj1\tpe\tnope.uai\n", ":2:", "does not exist"),
        "columns.tsv": ("id\tkind\tnetwork\nj1\tpe\n", ":2:", "columns"),
        "bad.json": ('[{"id": "j1", "kind": "pe", "network": "' + a + '"},\n {"id": "j2", "kind": "lod"}]', ":2:", "ped"),
    }
    for name, (text, line, word) in cases.items():
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(tmp, "out-" + name)
        r = subprocess.run([EXE, "batch", path, "--out", out], capture_output=True, text=True)
        check(r.returncode == 2 and name + line in r.stderr and word in r.stderr,
              f"bad manifest {name}: exit 2 naming the line ({r.returncode}: {r.stderr.strip()})")
        check(not os.path.exists(os.path.join(out, "results")) or not os.listdir(os.path.join(out, "results")),
              f"bad manifest {name}: nothing ran")


def test_kill_and_resume(tmp):
    nets = [copy_net(tmp, n) for n in ("linkage_24", "linkage_21", "linkage_16")]
    jobs = [(f"j{i:02d}", nets[i % len(nets)]) for i in range(9)]
    manifest = write_jobs(tmp, ("id", "kind", "network"), [(j, "pe", n) for j, n in jobs])
    expect = {n: single_pe(os.path.join(tmp, n)) for n in nets}
    out = os.path.join(tmp, "out")
    journal = os.path.join(out, "journal.log")
    cmd = [EXE, "batch", manifest, "--out", out, "--jobs", "1"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        if os.path.exists(journal) and len(open(journal).read().split()) >= 4:  # 2 jobs done
            break
        if p.poll() is not None:
            break
        time.sleep(0.05)
    killed_midway = p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait()
    done_before = len(open(journal).read().split()) // 2 if os.path.exists(journal) else 0
    check(killed_midway and 0 < done_before < len(jobs), f"batch killed midway ({done_before} of {len(jobs)} done)")
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True)
    check(r.returncode == 0, f"resume completes (exit {r.returncode}: {r.stderr[-300:]})")
    completed = open(journal).read().split()[1::2]
    check(sorted(completed) == sorted(j for j, _ in jobs),
          f"every job ran to completion exactly once ({len(completed)} completions for {len(jobs)} jobs)")
    s = read_summary(os.path.join(out, "summary.tsv"))
    for j, n in jobs:
        with open(os.path.join(out, "results", j + ".json")) as f:
            got = json.load(f)["log10_pr"]
        check(abs(got - expect[n]) < 1e-9 and s[j]["status"] == "ok", f"{j} equals the uninterrupted answer")
        check(s[j]["where"] != "", f"{j}: summary says where it ran, also when adopted by --resume")
    check(not any(".tmp" in f for f in os.listdir(os.path.join(out, "results"))), "no temporary files left")


def single_pe_full_json(network, evidence=None):
    cmd = [EXE, "pe", "-q", "--json", network] + (["-e", evidence] if evidence else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def single_pe_json(network, evidence=None):
    j = single_pe_full_json(network, evidence)
    return j["log10_pr"] if j is not None else None


def test_plan_sharing(tmp):
    """Jobs of one network share its compiled plan in one worker process: their answers equal
    the single commands'; a job whose evidence is bad fails alone inside the group; a worker
    killed midway (SIGKILL from the test) leaves its unfinished jobs to be run again one by one."""
    net = copy_net(tmp, "Pedigree_11")
    other = copy_net(tmp, "Pedigree_13")
    toks = open(os.path.join(tmp, net + ".evid")).read().split()
    k = int(toks[0])
    pairs = [(toks[1 + 2 * i], toks[2 + 2 * i]) for i in range(k)]
    evs = {}
    # same observed variables, some values changed (same reduced structure, other tables)
    for n, flips in (("flip1", (0,)), ("flip2", (1, 2)), ("flip3", (3,))):
        p = [(v, str(1 - int(x)) if i in flips and x in "01" else x) for i, (v, x) in enumerate(pairs)]
        evs[n] = p
    evs["drop"] = pairs[1:]  # one observation fewer: another structure
    for n, p in evs.items():
        with open(os.path.join(tmp, n + ".evid"), "w") as f:
            f.write(f"{len(p)} " + " ".join(f"{v} {x}" for v, x in p) + "\n")
    with open(os.path.join(tmp, "bad.evid"), "w") as f:
        f.write("1 0 99\n")  # a value outside the domain
    rows = [("own1", net, ""), ("flip1", net, "flip1.evid"), ("own2", net, ""), ("bad", net, "bad.evid"),
            ("flip2", net, "flip2.evid"), ("drop", net, "drop.evid"), ("flip3", net, "flip3.evid"),
            ("o1", other, ""), ("o2", other, "")]
    manifest = write_jobs(tmp, ("id", "kind", "network", "evidence"), [(j, "pe", n, e) for j, n, e in rows])
    expect = {j: single_pe_json(os.path.join(tmp, n), os.path.join(tmp, e) if e else None) for j, n, e in rows}
    check(expect["bad"] is None, "the bad evidence fails as a single command")
    succeeding = {j for j, _, _ in rows if j != "bad"}
    for mode, extra in (("shared", []), ("crash", []), ("separate", ["--no-share"])):
        def command(out):
            return [EXE, "batch", manifest, "--out", out, "--jobs", "1", "--json"] + extra

        out = os.path.join(tmp, "out-" + mode)
        if mode == "crash":
            # a group worker killed (SIGKILL) after some of its jobs are done, as a crash ends it
            r, out, killed = batch_with_a_worker_killed(command, out, succeeding)
            check(killed is not None, f"crash: a group worker killed midway ({killed})")
        else:
            r = subprocess.run(command(out), capture_output=True, text=True)
        check(r.returncode == 4, f"{mode}: exit 4 for the one bad job (got {r.returncode}: {r.stderr[-300:]})")
        summary = json.loads(r.stdout)
        s = read_summary(os.path.join(out, "summary.tsv"))
        check(s["bad"]["status"] == "failed" and "99" in s["bad"]["error"],
              f"{mode}: the bad job fails alone with its message: {s['bad']['error']}")
        for j, _, _ in rows:
            if j == "bad":
                continue
            with open(os.path.join(out, "results", j + ".json")) as f:
                res = json.load(f)
            got = res["log10_pr"]
            same = got == expect[j] or (isinstance(got, float) and abs(got - expect[j]) < 1e-9)
            check(same and s[j]["status"] == "ok", f"{mode}: {j} equals the single command ({got} vs {expect[j]}, "
                  f"plan {res.get('batch_plan', 'own process')})")
        completed = open(os.path.join(out, "journal.log")).read().split()[1::2]
        check(sorted(completed) == sorted(j for j, _, _ in rows if j != "bad"),
              f"{mode}: each job completed once ({len(completed)})")
        if mode == "shared":
            # a job's JSON is the single command's, whichever process ran it (plus batch_plan)
            single = single_pe_full_json(os.path.join(tmp, net), os.path.join(tmp, "flip1.evid"))
            with open(os.path.join(out, "results", "flip1.json")) as f:
                grouped = json.load(f)
            # (memory_limit is there only when a command lowered its limit to the memory
            # available at that moment, which other processes of the machine move)
            check(set(grouped) - {"batch_plan", "memory_limit"} == set(single) - {"memory_limit"}
                  and set(grouped["schedule"]) == set(single["schedule"]),
                  f"shared: a grouped job's JSON has the single command's keys "
                  f"({sorted(set(grouped) ^ set(single))})")
            check(summary["plans_shared"] >= 3 and summary["group_workers"] >= 1,
                  f"shared: jobs reused a plan ({summary['plans_shared']} jobs, {summary['group_workers']} workers)")
        if mode == "separate":
            check(summary["group_workers"] == 0, "--no-share runs one process per job")
        if mode == "crash":
            check("run again one by one" in r.stderr, "crash: the dead worker's jobs are run again alone")


def test_conditioned_jobs(tmp):
    """pe jobs under a --max-memory far below their plan's need are conditioned in the group
    worker (the plan shared between the jobs, its source tables refilled per job) and give the
    single command's answer without the limit."""
    net = copy_net(tmp, "linkage_16")
    toks = open(os.path.join(tmp, net + ".evid")).read().split()
    pairs = [(toks[1 + 2 * i], toks[2 + 2 * i]) for i in range(int(toks[0]))]
    flip = [(v, "1" if x == "0" else "0" if x == "1" else x) if i == len(pairs) - 1 else (v, x)
            for i, (v, x) in enumerate(pairs)]
    with open(os.path.join(tmp, "flip.evid"), "w") as f:
        f.write(f"{len(flip)} " + " ".join(f"{v} {x}" for v, x in flip) + "\n")
    # 12M: under the 15.5 MiB its order needs (8 slices), over the 10.9 MiB the program and the
    # tables every slice is cut from need (16M fits an order of the search since version 3)
    opts = "--threads 2 --max-memory 12M"
    rows = [("own", ""), ("flip", "flip.evid")]
    jobs = write_jobs(tmp, ("id", "kind", "network", "evidence", "options"),
                      [(j, "pe", net, e, opts) for j, e in rows])
    out = os.path.join(tmp, "out")
    r = subprocess.run([EXE, "batch", jobs, "--out", out, "--jobs", "1"], capture_output=True, text=True)
    check(r.returncode == 0, f"conditioned jobs: exit 0 (got {r.returncode}: {r.stderr[-300:]})")
    for j, e in rows:
        expect = single_pe_json(os.path.join(tmp, net), os.path.join(tmp, e) if e else None)
        with open(os.path.join(out, "results", j + ".json")) as f:
            res = json.load(f)
        got = res["log10_pr"]
        check(isinstance(got, float) and abs(got - expect) < 1e-9,
              f"conditioned jobs: {j} equals pe without the limit ({got} vs {expect})")
        check(res.get("conditioning", {}).get("slices", 1) >= 2,
              f"conditioned jobs: {j} ran in slices ({res.get('conditioning', {}).get('slices')}, "
              f"plan {res.get('batch_plan')})")


def test_device_worker(tmp):
    """The device worker (`batch --serve`, one per GPU in a batch on a GPU machine) runs the jobs
    it reads on stdin through the single commands' pipeline in one process: each result equals
    the single command's, a failing job fails alone with its exit code and message, and the
    worker goes on to the next job."""
    a = copy_net(tmp, "Pedigree_11")
    b = copy_net(tmp, "Pedigree_13")
    ex = os.path.join(DATA, "linkage", "fastlink_example")
    ped, dat = os.path.join(ex, "pedfile.dat"), os.path.join(ex, "datafile.dat")
    out = os.path.join(tmp, "out")
    for d in ("results", "logs"):
        os.makedirs(os.path.join(out, d))
    with open(os.path.join(tmp, "m.tsv"), "w") as f:  # the worker reads jobs from stdin only
        f.write("id\tkind\tnetwork\toptions\n")
    jobs = [("p11", ["pe", os.path.join(tmp, a), "--json", "--device", "cpu"]),
            ("missing", ["pe", os.path.join(tmp, "none.uai"), "--json"]),
            ("lod", ["lod", "--ped", ped, "--dat", dat, "--json", "--device", "cpu"]),
            ("tight", ["pe", os.path.join(tmp, a), "--json", "--max-memory", "1K"]),
            ("badopt", ["pe", os.path.join(tmp, a), "--json", "--no-such-option"]),
            ("p13", ["pe", os.path.join(tmp, b), "--json", "--threads", "1"])]
    stdin = "".join(json.dumps({"id": i, "args": args, "threads": 1}) + "\n" for i, args in jobs)
    r = subprocess.run([EXE, "batch", os.path.join(tmp, "m.tsv"), "--out", out, "--serve"],
                       input=stdin, capture_output=True, text=True)
    check(r.returncode == 0, f"device worker: exit 0 at the end of its input (got {r.returncode})")
    lines = {l.split("\t")[1]: l.split("\t") for l in r.stdout.splitlines()}
    check(sorted(lines) == sorted(i for i, _ in jobs), f"device worker: one line per job ({r.stdout})")
    for i in ("p11", "p13"):
        check(lines[i][0] == "ok", f"device worker: {i} ok ({lines[i]})")
        with open(os.path.join(out, "results", i + ".json")) as f:
            got = json.load(f)["log10_pr"]
        want = single_pe(os.path.join(tmp, a if i == "p11" else b))
        check(abs(got - want) < 1e-12, f"device worker: {i} equals the single command ({got} vs {want})")
    single = subprocess.run([EXE, "lod", "--ped", ped, "--dat", dat, "--json", "--device", "cpu", "-q"],
                            capture_output=True, text=True, check=True)
    with open(os.path.join(out, "results", "lod.json")) as f:
        got = json.load(f)
    want = json.loads(single.stdout)
    check([e["total"]["ln_l"] for e in got["evaluations"]] == [e["total"]["ln_l"] for e in want["evaluations"]],
          "device worker: the lod job equals the single command")
    check(lines["missing"][0] == "failed" and "exit code 2" in lines["missing"][3] and "none.uai" in lines["missing"][3],
          f"device worker: a missing network fails with exit code 2 and its path ({lines['missing']})")
    check(lines["tight"][0] == "failed" and "exit code 3" in lines["tight"][3],
          f"device worker: an impossible memory limit fails with exit code 3 ({lines['tight']})")
    check(lines["badopt"][0] == "failed" and "exit code 2" in lines["badopt"][3],
          f"device worker: an unknown option fails with exit code 2 ({lines['badopt']})")
    for i in ("missing", "tight", "badopt"):
        check(not os.path.exists(os.path.join(out, "results", i + ".json")), f"device worker: no result for {i}")
    with open(os.path.join(out, "journal.log")) as f:
        journal = f.read().split()
    check(sorted(j for j in journal if j != "completed") == ["lod", "p11", "p13"],
          f"device worker: the journal lists the completed jobs ({journal})")


def test_order_search_ahead(tmp):
    """A batch on a GPU machine searches its GPU jobs' orders ahead with `kinfer info --device gpu
    --order-cache DIR` and their device workers run `pe --device gpu` with the same cache: the
    order info caches must be the one pe looks up (same key), for every --device and with the
    job's own network options."""
    net = os.path.join(DATA, "uai", "Pedigree_12.uai")
    for device, extra in (("gpu", []), ("auto", []), ("gpu", ["--seed", "7", "--order-time", "0.5"])):
        cache = os.path.join(tmp, "cache-" + device + "-" + str(len(extra)))
        info = subprocess.run([EXE, "info", net, "--device", device, "--order-cache", cache, "--json"] + extra,
                              capture_output=True, text=True)
        check(info.returncode == 0, f"info --device {device}: exit 0 ({info.stderr[-300:]})")
        searched = json.loads(info.stdout)["order"]
        pe = subprocess.run([EXE, "pe", net, "--device", device, "--order-cache", cache, "--json"] + extra,
                            capture_output=True, text=True)
        check(pe.returncode == 0, f"pe --device {device}: exit 0 ({pe.stderr[-300:]})")
        used = json.loads(pe.stdout)["order"]
        check(used["heuristic"] == "cached " + searched["heuristic"],
              f"pe --device {device} {extra} uses the order info cached ({used['heuristic']})")
        check(used["log2_total_state"] == searched["log2_total_state"],
              f"pe --device {device} {extra}: the cached order's state space is info's")


def test_mar_mpe_jobs(tmp):
    """Jobs of kind mar and mpe: their results are the single commands' (marginals, assignment,
    log10 P), beside a pe job; a mar job whose options the command refuses fails alone."""
    a = copy_net(tmp, "Pedigree_13")
    b = copy_net(tmp, "Grids_11")
    jobs = write_jobs(tmp, ("id", "kind", "network", "options"),
                      [("m13", "mar", a, "--order minfill"), ("e13", "mpe", a, "--order minfill"),
                       ("mg", "mar", b, "--order minfill"), ("p13", "pe", a, ""), ("bad", "mar", a, "--uai-output")])
    r = subprocess.run([EXE, "batch", jobs, "--out", os.path.join(tmp, "out")], capture_output=True, text=True)
    check(r.returncode == 4, f"mar/mpe batch: the bad job gives exit 4 (got {r.returncode}: {r.stderr[-300:]})")
    s = read_summary(os.path.join(tmp, "out", "summary.tsv"))
    for job in ("m13", "e13", "mg", "p13"):
        check(s[job]["status"] == "ok", f"mar/mpe batch: {job} completes ({s[job]['error']})")
    check(s["bad"]["status"] == "failed", "mar/mpe batch: the job with a bad option fails alone")

    def single(cmd, net):
        out = subprocess.run([EXE, cmd, "-q", "--json", "--order", "minfill", os.path.join(tmp, net)],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    def result(job):
        with open(os.path.join(tmp, "out", "results", job + ".json")) as f:
            return json.load(f)

    for job, net in (("m13", a), ("mg", b)):
        got, want = result(job), single("mar", net)
        worst = max(abs(x - y) for p, q in zip(got["marginals"], want["marginals"]) for x, y in zip(p, q))
        check(worst < 1e-12 and abs(got["log10_pr"] - want["log10_pr"]) < 1e-9,
              f"mar job {job}: the single command's marginals (largest difference {worst})")
        check(s[job]["answer"] != "", f"mar job {job}: its log10 P(e) in the summary")
    got, want = result("e13"), single("mpe", a)
    check(got["assignment"] == want["assignment"] and abs(got["log10_pr"] - want["log10_pr"]) < 1e-9,
          "mpe job: the single command's assignment and log10 P(x, e)")


for test in (test_failures_isolated, test_bad_manifests, test_kill_and_resume, test_plan_sharing,
             test_conditioned_jobs, test_device_worker, test_order_search_ahead, test_mar_mpe_jobs):
    with tempfile.TemporaryDirectory() as tmp:
        test(tmp)
finish()
