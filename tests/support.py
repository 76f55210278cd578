"""What the Python tests share (support.hpp's counterpart): the kinfer binary and the data folder
meson passes (KINFER_EXE, KINFER_DATA), a check that prints and records each assertion, the UAI
networks by name and their references (data/uai/REFERENCES.tsv), and a batch's group worker
killed from outside as a crash would end it."""
import os
import signal
import subprocess
import sys
import time

EXE = os.environ["KINFER_EXE"]
DATA = os.environ["KINFER_DATA"]
passes, failures = [], []


def check(cond, what):
    """Prints `ok` or `FAIL` and what was asserted; the verdict is counted for finish()."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    (passes if cond else failures).append(what)
    return cond


def finish():
    """Prints the counts and exits 1 when a check failed."""
    print(f"{len(passes)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


def network(name):
    """The path of a UAI network of data/uai (plain or gzipped)."""
    for cand in (name + ".uai", name + ".uai.gz"):
        p = os.path.join(DATA, "uai", cand)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(name)


def references():
    """name -> (log10 P(e), tolerance: half the last printed digit) from data/uai/REFERENCES.tsv."""
    ref = {}
    with open(os.path.join(DATA, "uai", "REFERENCES.tsv")) as f:
        next(f)
        for line in f:
            name, value = line.split("\t")[:2]
            decimals = len(value.split(".")[1]) if "." in value else 0
            ref[name] = (float(value), 0.5 * 10 ** -decimals)
    return ref


def group_workers(out):
    """The running group workers of the batch writing to `out`, as {pid: [job id, ...]}: the
    processes `kinfer batch MANIFEST --out OUT --worker ID,ID,...` (their command line)."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
        except OSError:
            continue
        if "--worker" in argv[:-1] and "--out" in argv[:-1] and \
                os.path.realpath(argv[argv.index("--out") + 1]) == os.path.realpath(out):
            found[int(d)] = argv[argv.index("--worker") + 1].split(",")
    return found


def journaled(out):
    """The jobs the journal of the batch writing to `out` lists as completed."""
    try:
        with open(os.path.join(out, "journal.log")) as f:
            return set(f.read().split()[1::2])
    except OSError:
        return set()


def kill_group_worker_midway(batch, out, succeeding, timeout=300):
    """SIGKILLs a group worker of `batch` (a running Popen writing to `out`) after some but not
    all of its jobs that should succeed (`succeeding`, job ids) have their result
    (out/results/ID.json, which the worker renames into place when a job is done) and their
    journal line (appended just after: a kill between the two would leave a result the journal,
    written for people, does not list). Each worker found is stopped (SIGSTOP) while its results
    are counted, so none finishes in between, and continued when it is not yet midway. Returns
    (pid, its jobs, those done), or None when no worker was caught midway before the batch
    ended."""
    deadline = time.time() + timeout
    while time.time() < deadline and batch.poll() is None:
        for pid, ids in group_workers(out).items():
            mine = [j for j in ids if j in succeeding]
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            done = [j for j in mine if os.path.exists(os.path.join(out, "results", j + ".json"))]
            if 0 < len(done) < len(mine) and set(done) <= journaled(out):
                os.kill(pid, signal.SIGKILL)
                return pid, ids, done
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.002)
    return None


def batch_with_a_worker_killed(command, base, succeeding, env=None, attempts=3):
    """Runs the batch command(out) and kills one of its group workers midway
    (kill_group_worker_midway); in a fresh folder base-1, base-2, ... again, at most `attempts`
    times, in the rare case that no worker was caught midway. Returns (the finished process with
    its output, its out folder, (pid, jobs, done) of the worker killed or None)."""
    for attempt in range(1, attempts + 1):
        out = f"{base}-{attempt}"
        # the output goes to files: a pipe nobody reads while the test waits could fill
        with open(out + ".stdout", "w+") as so, open(out + ".stderr", "w+") as se:
            p = subprocess.Popen(command(out), stdout=so, stderr=se, text=True, env=env)
            killed = kill_group_worker_midway(p, out, succeeding)
            p.wait(timeout=600)
            so.seek(0)
            se.seek(0)
            done = subprocess.CompletedProcess(p.args, p.returncode, so.read(), se.read())
        if killed:
            break
    return done, out, killed
