#!/usr/bin/env python3
"""Runs one benchmark suite of bench/suites.json and writes its table.

  scripts/bench.py SUITE [--out bench/out] [--kinfer build/apps/kinfer] [--build DIR]
                         [--networks A,B,...] [--steps S,...] [--label NAME] [--dry-run]
  scripts/bench.py --list

Each suite names its networks and the commands it runs, from the repository root, with the
files of the repository only (data/uai, data/uai/large). The results go to OUT/SUITE/ (an
earlier OUT/SUITE/ is kept as OUT/SUITE.old/): each command's output and log, machine.txt (the
CPU, its cores, memory, the GPUs nvidia-smi lists, kinfer's version and commit), commands.sh
(the exact commands, to run again by hand) and TABLE.md (the suite's table). Every command runs
with XDG_CACHE_HOME=OUT/SUITE/cache: no order cache and no calibrated profile from earlier runs,
the shipped profiles only (what a new user gets). --dry-run prints the commands and runs nothing.

kinfer must be built first: `./scripts/kinfer --version` builds build/apps/kinfer (the drivers
under build/bench/ need `ninja -C build bench/gpu/bucket_bench` and the like; a suite says
which). BENCHMARKS.md has each suite's machine kind and the numbers measured there.
"""
import argparse
import csv
import glob
import json
import os
import platform
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = os.path.join(REPO, "bench", "suites.json")
DATA_DIRS = [os.path.join(REPO, "data", "uai"), os.path.join(REPO, "data", "uai", "large")]


def load_suites(path):
    with open(path) as f:
        return json.load(f)["suites"]


def rel(path):
    """A path as the commands show it: relative to the repository root when inside it."""
    p = os.path.abspath(path)
    r = os.path.relpath(p, REPO)
    return p if r.startswith("..") else r


def network_path(name):
    if os.path.isfile(name):
        return rel(name)
    for d in DATA_DIRS:
        for cand in (name + ".uai", name + ".uai.gz"):
            if os.path.isfile(os.path.join(d, cand)):
                return rel(os.path.join(d, cand))
    sys.exit(f"bench.py: no network {name} in data/uai or data/uai/large")


# ----------------------------------------------------------------------------------------------
# The machine

def gpus():
    """[(name, memory, driver)] from nvidia-smi, or [] when it is missing or lists nothing."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [tuple(x.strip() for x in line.split(",")) for line in r.stdout.splitlines()
            if line.strip() and r.returncode == 0]


def machine(kinfer):
    cpu = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    lines = [f"host: {socket.gethostname()}, {platform.platform()}",
             f"cpu: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB memory"]
    g = gpus()
    lines += [f"gpu {i}: {', '.join(x)}" for i, x in enumerate(g)] or ["gpu: none (nvidia-smi lists no GPU)"]
    try:
        v = subprocess.run([kinfer, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        v = "not found"
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    lines.append(f"kinfer: {rel(kinfer)} ({v}); repository at {commit}"
                 + (" with uncommitted changes" if dirty else ""))
    return lines


def need_met(need, build):
    """(met, why not) for one entry of a suite's or step's needs."""
    if need == "gpu":
        return bool(gpus()), "no GPU (nvidia-smi lists none)"
    if need.startswith("gpus>="):
        n = int(need[len("gpus>="):])
        return len(gpus()) >= n, f"fewer than {n} GPUs"
    if need == "fastlink":
        ok = shutil.which("unknown") and shutil.which("mlink")
        return bool(ok), "FASTLINK's unknown and mlink are not on PATH (Debian package fastlink)"
    if need == "mpirun":
        return bool(shutil.which("mpirun")), "no mpirun on PATH (Open MPI)"
    path = need.replace("{build}", build)
    return os.path.exists(os.path.join(REPO, path)), (
        f"{rel(os.path.join(REPO, path))} is missing (build it: ninja -C {rel(build)} "
        f"{os.path.relpath(os.path.join(REPO, path), os.path.join(REPO, build))})")


# ----------------------------------------------------------------------------------------------
# Commands

def expand(args, subst, networks):
    out = []
    for a in args:
        if a == "{networks}":
            out += networks
            continue
        for k, v in subst.items():
            a = a.replace("{" + k + "}", v)
        out.append(a)
    return out


def globbed(cmd):
    """The command with its patterns (an argument holding *) expanded, as a shell would."""
    out = []
    for a in cmd:
        hits = sorted(glob.glob(os.path.join(REPO, a))) if "*" in a else []
        out += [rel(h) for h in hits] if hits else [a]
    return out


def show(cmd, env=None, stdout=None):
    s = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    s = (s + " " if s else "") + " ".join(c if "*" in c and " " not in c else shlex.quote(c) for c in cmd)
    return s + (f" > {shlex.quote(stdout)}" if stdout else "")


def plan(suite, args, out_dir, kinfer, build):
    """[(step name, label, command, env, stdout file or None, timeout, needs)] in run order."""
    networks = args.networks.split(",") if args.networks else suite.get("networks", [])
    base = {"kinfer": rel(kinfer), "build": rel(build), "out": rel(out_dir), "label": args.label}
    runs = []
    for step in suite["steps"]:
        if args.steps and step["name"] not in args.steps.split(","):
            continue
        for net in (networks if step.get("foreach") else [None]):
            subst = dict(base)
            if net is not None:
                subst.update(network=os.path.basename(net).split(".uai")[0], network_path=network_path(net))
            cmd = expand(step["run"], subst, networks)
            stdout = expand([step["stdout"]], subst, networks)[0] if step.get("stdout") else None
            label = step["name"] + (f"-{subst['network']}" if net is not None else "")
            runs.append((step["name"], label, cmd, step.get("env", {}), stdout, step.get("timeout"),
                         step.get("needs", [])))
    return runs


def run_step(label, cmd, env, stdout, timeout, out_dir):
    """Runs one command from the repository root; its output goes to the terminal and to
    OUT/LABEL.log, or to the stdout file (stderr then to the log). Returns the exit code."""
    log = os.path.join(out_dir, label + ".log")
    full_env = dict(os.environ, **env)
    cmd = globbed(cmd)
    t0 = time.time()
    with open(log, "w") as lf:
        try:
            if stdout:
                with open(os.path.join(REPO, stdout), "w") as so:
                    p = subprocess.run(cmd, cwd=REPO, env=full_env, stdout=so, stderr=lf, timeout=timeout)
                rc = p.returncode
            else:
                p = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
                timer = threading.Timer(timeout, p.kill) if timeout else None
                if timer:
                    timer.start()
                for line in p.stdout:
                    sys.stdout.write(line)
                    lf.write(line)
                rc = p.wait()
                if timer:
                    timer.cancel()
                    rc = 124 if rc < 0 and time.time() - t0 >= timeout else rc
        except subprocess.TimeoutExpired:
            rc = 124
        except OSError as e:
            lf.write(f"{e}\n")
            rc = 127
    print(f"  -> exit {rc} after {time.time() - t0:.1f} s" + (f" ({rel(log)})" if rc else ""), flush=True)
    return rc


# ----------------------------------------------------------------------------------------------
# Tables

def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def exact(row):
    """True / False: the answer within half the reference's last printed digit; None: unknown."""
    got, ref = num(row.get("log10_pr")), row.get("reference") or ""
    if got is None or num(ref) is None:
        return None
    decimals = len(ref.split(".")[1]) if "." in ref else 0
    return abs(got - float(ref)) <= 0.5 * 10 ** -decimals + 1e-12


def wall(row, split=True):
    w = num(row.get("wall_s"))
    if w is None:
        return (row.get("wall_s") or "?")[:60]
    if not split:
        return f"{w:.3f}"
    return f"{w:.3f} ({float(row['plan_s']):.3f} / {float(row['compute_s']):.3f})"


def verdict(rows):
    v = [exact(r) for r in rows]
    if any(x is False for x in v):
        return "**no**"
    return "yes" if v and all(v) else "-"


def table_pe(spec, out_dir):
    pairs = read_tsv(os.path.join(out_dir, spec["pairs"]))
    again = read_tsv(os.path.join(out_dir, spec["again"])) if spec.get("again") else []
    has_again = bool(spec.get("again"))
    L = ["Wall seconds of the whole process (the JSON's plan / compute); cold: `--order-cache none`.", "",
         "| network | auto wall s (plan / compute) | cpu wall s (plan / compute) | cpu / auto "
         "| auto peak RSS / estimate MiB |" + (" auto again (back to back) |" if has_again else "")
         + " answer = reference |", "|---|---|---|---|---|---|" + ("---|" if has_again else "")]
    nets = list(dict.fromkeys(r["network"] for r in pairs))
    for n in nets:
        rows = [r for r in pairs if r["network"] == n]
        auto = next((r for r in rows if r["device"] == "auto"), None)
        cpu = next((r for r in rows if r["device"] == "cpu"), None)
        ag = next((r for r in again if r["network"] == n), None)
        ratio = "-"
        if auto and cpu and num(auto.get("wall_s")) and num(cpu.get("wall_s")):
            ratio = f"{float(cpu['wall_s']) / float(auto['wall_s']):.2f}x"
        mem = f"{auto['rss_MiB']} / {auto['est_peak_MiB']}" if auto and num(auto.get("wall_s")) else "-"
        again_cell = f" {wall(ag, False) if ag else '-'} |" if has_again else ""
        L.append(f"| {n} | {wall(auto) if auto else '-'} | {wall(cpu) if cpu else '-'} | {ratio} | {mem} |"
                 f"{again_cell} {verdict(rows + ([ag] if ag else []))} |")
    for fname, label in spec.get("more", []):
        rows = read_tsv(os.path.join(out_dir, fname))
        if not rows:
            L.append(f"| {label} | not run | | | |" + (" |" if has_again else "") + " |")
            continue
        ok = [r for r in rows if num(r.get("wall_s")) is not None]
        walls = ", ".join(wall(r, False) for r in rows)
        if ok:
            pl = [float(r["plan_s"]) for r in ok]
            co = [float(r["compute_s"]) for r in ok]
            walls += f" ({min(pl):.3f}-{max(pl):.3f} / {min(co):.3f}-{max(co):.3f}), {ok[0]['slices']} slices"
            rss = [float(r["rss_MiB"]) for r in ok]
            mem = f"{min(rss):.0f}-{max(rss):.0f} / {ok[0]['est_peak_MiB']}"
        else:
            mem = "-"
        L.append(f"| {label} | {walls} | | | {mem} |" + (" |" if has_again else "") + f" {verdict(rows)} |")
    return L


def table_order(spec, out_dir, networks):
    L = ["States and tables of the plan `kinfer info` reports: per slice when the memory limit "
         "conditions it (slices > 1).", "",
         "| network | log2 total states | log2 largest table | width | slices | search s "
         "| work (nominal core-s) | stopped by | heuristic |", "|---|---|---|---|---|---|---|---|---|"]
    for n in networks:
        name = os.path.basename(n).split(".uai")[0]
        try:
            j = json.load(open(os.path.join(out_dir, f"info-{name}.json")))
            o = j["order"]
        except (OSError, ValueError, KeyError):
            L.append(f"| {name} | failed | | | | | | | |")
            continue
        slices = (j.get("conditioning") or {}).get("slices", 1)
        L.append(f"| {name} | {o['log2_total_state']:.2f} | {o['log2_max_table']:.2f} | {o['width']} "
                 f"| {slices} | {o['seconds']:.2f} | {o.get('work', float('nan')):.2f} "
                 f"| {o.get('stopped_by', '-')} | {o['heuristic']} |")
    return L


def table_gpus(spec, out_dir):
    """Slices over one GPU against all GPUs; the optional unconditioned run gives the compute a
    sliced plan is compared with (sliced compute / unconditioned compute, on one GPU)."""
    def rows(f):
        return [r for r in read_tsv(os.path.join(out_dir, f)) if num(r.get("wall_s")) is not None]
    whole = None
    L = []
    if "unconditioned" in spec:
        w = rows(spec["unconditioned"][0])
        if w:
            whole = statistics.median(float(r["compute_s"]) for r in w)
            L += [f"{spec['unconditioned'][1]}: compute {', '.join(r['compute_s'] for r in w)} s "
                  f"on one GPU, {w[0]['slices']} slices", ""]
    L += ["| case | slices | compute s, 1 GPU | compute s, all GPUs | speedup (compute, medians) "
          "| 1-GPU compute / unconditioned | wall s, 1 -> all GPUs | answers equal |",
          "|---|---|---|---|---|---|---|---|"]
    for one, two, label in spec["pairs"]:
        a, b = rows(one), rows(two)
        if not a or not b:
            L.append(f"| {label} | not run | | | | | | |")
            continue
        ca = [float(r["compute_s"]) for r in a]
        cb = [float(r["compute_s"]) for r in b]
        same = len({r["log10_pr"] for r in a + b}) == 1
        vs_whole = (f"{statistics.median(ca) / whole:.1f}x"
                    if whole and label.startswith("linkage_11") else "")
        L.append(f"| {label} | {a[0]['slices']} | {', '.join(f'{x:.3f}' for x in ca)} "
                 f"| {', '.join(f'{x:.3f}' for x in cb)} | {statistics.median(ca) / statistics.median(cb):.2f}x "
                 f"| {vs_whole} | {statistics.median(float(r['wall_s']) for r in a):.2f} -> "
                 f"{statistics.median(float(r['wall_s']) for r in b):.2f} | {'yes' if same else '**no**'} |")
    return L


def table(suite, out_dir, networks, label):
    spec = suite.get("table")
    if not spec:  # the outputs as they are
        L = []
        for f in sorted(glob.glob(os.path.join(out_dir, "*.txt"))):
            if os.path.basename(f) != "machine.txt":
                text = open(f).read().rstrip("\n").splitlines()
                L += [f"From `{rel(f)}`:", "", "```"] + text[:60] + (["..."] if len(text) > 60 else []) + ["```", ""]
        return L
    kind = spec["kind"]
    if kind == "pe":
        return table_pe(spec, out_dir)
    if kind == "order":
        return table_order(spec, out_dir, networks)
    if kind == "gpus":
        return table_gpus(spec, out_dir)
    path = os.path.join(out_dir, spec["file"].replace("{label}", label))
    if not os.path.exists(path):
        return [f"(no {rel(path)}: see the logs)"]
    text = open(path).read().rstrip("\n").splitlines()
    return [f"From `{rel(path)}`:", ""] + (text if len(text) <= 200 else text[:200] + ["..."])


# ----------------------------------------------------------------------------------------------

def main():
    suites = load_suites(SUITES)
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="suites (bench/suites.json):\n" + "\n".join(
            f"  {k:12s} {v.get('machine', 'any')}" for k, v in suites.items()))
    ap.add_argument("suite", nargs="?", help="the suite to run (--list shows them)")
    ap.add_argument("--list", action="store_true", help="list the suites with what they measure")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out"),
                    help="results folder; the suite writes OUT/SUITE/ (default bench/out)")
    ap.add_argument("--kinfer", default=os.path.join(REPO, "build", "apps", "kinfer"),
                    help="the kinfer executable (default build/apps/kinfer)")
    ap.add_argument("--build", help="the build folder of the drivers under bench/ "
                                    "(default: the one that holds --kinfer, else build)")
    ap.add_argument("--networks", help="comma-separated networks instead of the suite's")
    ap.add_argument("--steps", help="comma-separated steps of the suite to run (default: all)")
    ap.add_argument("--label", default=socket.gethostname(), help="this machine's name in file names")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args()

    if args.list:
        for k, v in suites.items():
            print(f"{k}  [{v.get('machine', 'any')}]\n    {v['what']}\n")
        return 0
    if not args.suite:
        ap.error("name a suite (--list shows them)")
    if args.suite not in suites:
        ap.error(f"no suite {args.suite!r}; suites: {', '.join(suites)}")
    suite = suites[args.suite]
    kinfer = os.path.abspath(args.kinfer)
    if args.build:
        build = os.path.abspath(args.build)
    elif os.path.basename(os.path.dirname(kinfer)) == "apps":
        build = os.path.dirname(os.path.dirname(kinfer))
    else:
        build = os.path.join(REPO, "build")
    out_dir = os.path.join(os.path.abspath(args.out), args.suite)
    networks = args.networks.split(",") if args.networks else suite.get("networks", [])
    runs = plan(suite, args, out_dir, kinfer, build)

    problems = [why for need in suite.get("needs", []) for ok, why in [need_met(need, build)] if not ok]
    warnings = [why for need in suite.get("prefers", []) for ok, why in [need_met(need, build)] if not ok]
    uses_kinfer = any("{kinfer}" in a for step in suite["steps"] for a in step["run"])
    if uses_kinfer and not os.access(kinfer, os.X_OK):
        problems.insert(0, f"{rel(kinfer)} is missing: build it with ./scripts/kinfer --version (or give --kinfer)")

    header = [f"# {args.suite}", "", suite["what"], "",
              f"Machine kind of the numbers in BENCHMARKS.md: {suite.get('machine', 'any')}.", ""]
    if args.dry_run:
        print("\n".join(header))
        for w in problems + warnings:
            print(f"note: {w}")
        print(f"# output folder: {rel(out_dir)}; from the repository root:")
        print(f"export XDG_CACHE_HOME={shlex.quote(rel(os.path.join(out_dir, 'cache')))}"
              "  # no order cache, no calibrated profile")
        for name, label, cmd, env, stdout, timeout, needs in runs:
            missing = [why for need in needs for ok, why in [need_met(need, build)] if not ok]
            print(show(cmd, env, stdout) + (f"   # would be skipped: {'; '.join(missing)}" if missing else ""))
        return 0
    if problems:
        for p in problems:
            print(f"bench.py {args.suite}: {p}", file=sys.stderr)
        return 2

    if os.path.exists(out_dir):
        old = out_dir + ".old"
        shutil.rmtree(old, ignore_errors=True)
        os.rename(out_dir, old)
        print(f"(the earlier {rel(out_dir)} is now {rel(old)})")
    os.makedirs(out_dir)
    mach = machine(kinfer)
    with open(os.path.join(out_dir, "machine.txt"), "w") as f:
        f.write("\n".join(mach) + "\n")
    cache = os.path.join(out_dir, "cache")
    os.environ["XDG_CACHE_HOME"] = os.path.abspath(cache)  # absolute: some drivers change folder
    print("\n".join(header + mach))
    for w in warnings:
        print(f"warning: {w}")
    print()
    with open(os.path.join(out_dir, "commands.sh"), "w") as f:
        f.write(f"# scripts/bench.py {args.suite}: the commands, from the repository root\n")
        f.write(f"export XDG_CACHE_HOME={shlex.quote(rel(cache))}  # no order cache, no calibrated profile\n")
        for name, label, cmd, env, stdout, timeout, needs in runs:
            f.write(show(cmd, env, stdout) + "\n")

    started = time.strftime("%Y-%m-%d %H:%M %Z")
    failed = []
    for name, label, cmd, env, stdout, timeout, needs in runs:
        missing = [why for need in needs for ok, why in [need_met(need, build)] if not ok]
        print(f"$ {show(cmd, env, stdout)}", flush=True)
        if missing:
            print(f"  -> skipped: {'; '.join(missing)}")
            continue
        rc = run_step(label, cmd, env, stdout, timeout, out_dir)
        if rc:
            failed.append(label)

    shutil.rmtree(cache, ignore_errors=True)
    lines = header + ["Measured " + started + " on:", ""] + [f"- {m}" for m in mach] + [
        "", "Commands (from the repository root; also in commands.sh):", "", "```",
        f"export XDG_CACHE_HOME={shlex.quote(rel(cache))}"] + [
        show(c, e, s) for _, _, c, e, s, _, _ in runs] + ["```", ""] + table(suite, out_dir, networks, args.label)
    if failed:
        lines += ["", "Failed steps (see their .log): " + ", ".join(failed)]
    with open(os.path.join(out_dir, "TABLE.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n" + "\n".join(table(suite, out_dir, networks, args.label)))
    print(f"\nwrote {rel(os.path.join(out_dir, 'TABLE.md'))}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
