#!/usr/bin/env python3
"""Speed benchmark of kinfer's exact P(e) against pyAgrum on the UAI instances.

For each instance: sizes from `kinfer info --json`, time / peak memory / answer of
`kinfer pe --json`, then the same network and evidence through pyAgrum (LazyPropagation) in
a child process, both checked against REFERENCES.tsv. Every child runs under a wall-clock
timeout and an address-space limit, so nothing can reach the OOM killer.

The driver uses the standard library only. pyAgrum is a peer in this benchmark, never a
dependency of kinfer: it lives in scripts/.venv (made here when missing), and the same file is
re-run there with --pyagrum-child to do the pyAgrum side.

  scripts/bench_uai.py                        # every *.uai of data/uai
  scripts/bench_uai.py --data DIR             # every *.uai of DIR (with its REFERENCES.tsv)
  scripts/bench_uai.py Pedigree_11 CSP_12     # a few (names or paths)
  scripts/bench_uai.py --out /tmp/b ...       # results elsewhere than bench/out/uai

`scripts/bench.py pyagrum` runs it on every instance of data/uai.
"""

import argparse
import datetime
import gzip
import json
import math
import os
import platform
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_DATA = os.path.join(REPO, "data", "uai")
VENV = os.path.join(HERE, ".venv")
GB = 1 << 30


# ----------------------------------------------------------------------------------------------
# UAI reading (used by the pyAgrum child; stdlib only)
# ----------------------------------------------------------------------------------------------

def read_tokens(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return f.read().split()


def read_uai(path):
    """Returns (kind, card, scopes, tables); each table is a flat list, last scope var fastest."""
    tok = read_tokens(path)
    pos = 0

    def take():
        nonlocal pos
        if pos >= len(tok):
            raise ValueError(f"{path}: file ends early (token {pos})")
        pos += 1
        return tok[pos - 1]

    kind = take().upper()
    if kind not in ("MARKOV", "BAYES"):
        raise ValueError(f"{path}: expected MARKOV or BAYES, got {kind!r}")
    n = int(take())
    card = [int(take()) for _ in range(n)]
    m = int(take())
    scopes = []
    for _ in range(m):
        k = int(take())
        scopes.append([int(take()) for _ in range(k)])
    tables = []
    for i in range(m):
        k = int(take())
        size = 1
        for v in scopes[i]:
            size *= card[v]
        if k != size:
            raise ValueError(f"{path}: factor {i} has {k} entries, its scope needs {size}")
        tables.append([float(take()) for _ in range(k)])
    return kind, card, scopes, tables


def read_evidence(path):
    """UAI evidence: 'N v x ...' (2014 format) or '1 N v x ...' (one-sample format)."""
    if not path or not os.path.exists(path):
        return {}
    tok = [int(t) for t in read_tokens(path)]
    if not tok:
        return {}
    if len(tok) == 1 + 2 * tok[0]:
        pairs = tok[1:]
    elif len(tok) >= 2 and len(tok) == 2 + 2 * tok[1]:
        pairs = tok[2:]
    else:
        raise ValueError(f"{path}: not a UAI evidence file ({len(tok)} numbers)")
    return {pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}


# ----------------------------------------------------------------------------------------------
# pyAgrum side (runs inside scripts/.venv)
# ----------------------------------------------------------------------------------------------

def pyagrum_child(network, evidence_path):
    """Prints one JSON object: log10 P(e) by pyAgrum and the time its parts took.

    pyAgrum 3.3's UAI MARKOV reader stores each scope as an unordered set and fills the table
    in its own variable order, so tables whose scope is not listed in that order are read
    permuted (and it reads values as 32-bit floats). We therefore parse the file here and hand
    pyAgrum the factors through its API with explicit variable order.

    The factor graph becomes a Bayesian network pyAgrum's exact engines can answer P(e) for:
    each variable is a root with an all-ones "prior", each factor f over S gets a binary child
    C_f with parents S and P(C_f=1 | s) = f(s)/max f, observed at 1. Then
    P(C=1, e) = Z_e / prod(max f); with C_f observed its moral clique is S, so the junction
    tree is that of the Markov network. (ShaferShenoyMRFInference only returns Z_e/Z.)
    Dividing by max f keeps entries <= 1, so only the answer itself can leave double range.
    """
    import numpy as np
    import pyagrum as gum

    t0 = time.perf_counter()
    kind, card, scopes, tables = read_uai(network)
    evidence = read_evidence(evidence_path)
    t1 = time.perf_counter()

    bn = gum.BayesNet()
    ids = [bn.add(gum.LabelizedVariable(f"x{v}", "", c)) for v, c in enumerate(card)]
    log10_scale = 0.0
    ev = {f"x{v}": x for v, x in evidence.items()}
    for i, (scope, table) in enumerate(zip(scopes, tables)):
        t = np.asarray(table, dtype=np.float64).reshape([card[v] for v in scope] or [1])
        top = float(t.max()) if t.size else 0.0
        if top <= 0.0:
            print(json.dumps({"error": f"factor {i} is all zero: P(e) = 0"}))
            return
        log10_scale += math.log10(top)
        t = t / top
        c = bn.add(gum.LabelizedVariable(f"c{i}", "", 2))
        for v in scope:
            bn.addArc(ids[v], c)
        cpt = bn.cpt(c)
        # pyAgrum tables: names[0] varies fastest, so numpy axes are names reversed.
        full = np.stack([1.0 - t, t], axis=-1) if scope else np.array([1.0 - t[0], t[0]])
        axis_of = {f"x{v}": k for k, v in enumerate(scope)}
        axis_of[f"c{i}"] = len(scope)
        order = [axis_of[name] for name in reversed(cpt.names)]
        cpt.fillWith(np.transpose(full, order).reshape(-1).tolist())
        ev[f"c{i}"] = 1
    for v in ids:
        bn.cpt(v).fillWith(1.0)
    for v, c in enumerate(card):
        if c == 1:  # its only state: observing it is exact and keeps it out of the triangulation
            ev[f"x{v}"] = 0
    t2 = time.perf_counter()

    # No ie.setMaxMemory: in 3.3.1 any value makes makeInference throw std::bad_alloc even on
    # small networks; the driver's RLIMIT_AS is the memory bound.
    ie = gum.LazyPropagation(bn)
    ie.setEvidence(ev)
    jt = ie.junctionTree()  # triangulation; makeInference reuses it
    t3 = time.perf_counter()
    # The size of pyAgrum's largest clique explains a memory failure, so print it before trying.
    clique_log2 = [sum(math.log2(card[int(bn.variable(n).name()[1:])]) for n in jt.clique(c))
                   for c in jt.nodes()]
    print(json.dumps({"log2_max_clique": max(clique_log2, default=0.0), "cliques": len(clique_log2),
                      "log2_sum_cliques": math.log2(sum(2.0 ** x for x in clique_log2) or 1.0)}),
          flush=True)
    t4 = time.perf_counter()
    ie.makeInference()
    p = ie.evidenceProbability()
    t5 = time.perf_counter()

    out = {"engine": f"pyAgrum {gum.__version__} LazyPropagation", "threads": gum.getNumberOfThreads(),
           "parse_s": t1 - t0, "build_s": t2 - t1, "infer_s": (t3 - t2) + (t5 - t4), "p_scaled": p,
           "log10_scale": log10_scale}
    if p > 0 and math.isfinite(p):
        out["log10_pr"] = math.log10(p) + log10_scale
    elif p == 0:
        out["error"] = "P(e) underflowed to 0 in double precision (or evidence impossible)"
    else:
        out["error"] = f"P(e) = {p} in double precision (overflow)"
    print(json.dumps(out))


# ----------------------------------------------------------------------------------------------
# Driver helpers
# ----------------------------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_limited(cmd, timeout_s, as_bytes, cwd=None):
    """Runs cmd with a timeout and an address-space limit; returns a dict with rc, wall seconds,
    peak RSS (MB, from wait4 on the child), stdout, stderr, timed_out."""
    def limit():
        os.setsid()  # own process group, so a timeout kills its threads' helpers too
        if as_bytes > 0:
            resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, preexec_fn=limit, cwd=cwd)
        timed_out = False
        sleep = 0.001
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            if time.perf_counter() - t0 > timeout_s:
                timed_out = True
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(sleep)
            sleep = min(sleep * 2, 0.05)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"rc": p.returncode, "wall_s": wall, "peak_mb": ru.ru_maxrss / 1024.0,
                "stdout": out.read().decode(errors="replace"),
                "stderr": err.read().decode(errors="replace"), "timed_out": timed_out}


def last_json(text):
    """The JSON object a child printed (the whole text, or the last line that parses)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def json_lines(text):
    """Every one-line JSON object a child printed, merged (later lines win)."""
    merged = {}
    for line in text.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict):
            merged.update(j)
    return merged


def tail(text, n=300):
    text = " ".join(text.strip().split())
    return text[-n:]


def snapshot(commit, build_dir):
    """Exports a commit (git archive) beside the build folder, so that the benchmark measures a
    committed state even while the working tree is being edited; returns (source, build) dirs."""
    sha = subprocess.run(["git", "-C", REPO, "rev-parse", "--verify", commit + "^{commit}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    src = os.path.join(REPO, build_dir, f"snapshot-{sha[:12]}")
    if not os.path.exists(os.path.join(src, "meson.build")):
        os.makedirs(src, exist_ok=True)
        archive = subprocess.run(["git", "-C", REPO, "archive", sha], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    return src, os.path.join(src, "_build"), sha[:12]


def ensure_kinfer(args):
    """Path of the kinfer binary: --kinfer, or a release build (of --commit, if given)."""
    if args.kinfer:
        return os.path.abspath(args.kinfer)
    source, build = REPO, os.path.join(REPO, args.build_dir)
    if args.commit:
        source, build, args.commit = snapshot(args.commit, args.build_dir)
    env = dict(os.environ, PATH="/usr/local/cuda/bin:" + os.environ.get("PATH", ""))
    if not os.path.exists(os.path.join(build, "build.ninja")):
        log(f"configuring a release build in {build}")
        subprocess.run(["meson", "setup", build, source, "--buildtype=release"], check=True, env=env,
                       stdout=sys.stderr)
    opts = os.path.join(build, "meson-info", "intro-buildoptions.json")
    if os.path.exists(opts):
        with open(opts) as f:
            buildtype = next((o["value"] for o in json.load(f) if o["name"] == "buildtype"), "?")
        if buildtype != "release":
            sys.exit(f"{build} is a {buildtype} build; benchmarks need release "
                     f"(use --build-dir with another folder, or --kinfer)")
    subprocess.run(["ninja", "-C", build, "-j", str(args.jobs), "apps/kinfer"], check=True,
                   env=env, stdout=sys.stderr)
    return os.path.join(build, "apps", "kinfer")


def ensure_venv():
    py = os.path.join(VENV, "bin", "python")
    probe = [py, "-c", "import pyagrum, numpy; print(pyagrum.__version__)"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    log(f"creating {VENV} with pyAgrum from PyPI")
    subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    subprocess.run([py, "-m", "pip", "install", "--quiet", "pyagrum"], check=True,
                   stdout=sys.stderr)
    subprocess.run(probe, check=True, stdout=subprocess.DEVNULL)
    return py


def read_references(data_dir):
    refs = {}
    path = os.path.join(data_dir, "REFERENCES.tsv")
    if not os.path.exists(path):
        return refs
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            if row.get("instance"):
                refs[row["instance"]] = row
    return refs


def ref_tolerance(ref_text):
    """Half a unit of the last printed digit, plus float slack: what 'agrees' means."""
    decimals = len(ref_text.split(".")[1]) if "." in ref_text else 0
    return 0.5 * 10.0 ** -decimals + 1e-6


def agreement(value, ref):
    if ref is None:
        return "no ref"
    if value is None:
        return "-"
    if isinstance(value, str) or not math.isfinite(value):
        return "NO"
    diff = value - float(ref["ref_log10_pr"])
    if abs(diff) <= ref_tolerance(ref["ref_log10_pr"]):
        return "ok"
    return f"NO ({diff:+.2g})"


def instance_name(path):
    base = os.path.basename(path)
    for suffix in (".gz", ".uai"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def resolve_instances(names, data_dir):
    if not names:
        return sorted(os.path.join(data_dir, f) for f in os.listdir(data_dir)
                      if f.endswith(".uai") or f.endswith(".uai.gz"))
    out = []
    for n in names:
        for cand in (n, os.path.join(data_dir, n), os.path.join(data_dir, n + ".uai")):
            if os.path.isfile(cand):
                out.append(os.path.abspath(cand))
                break
        else:
            sys.exit(f"no such instance: {n}")
    return out


def exit3_message(stderr):
    """kinfer's own reason for refusing, without the log prefix."""
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    line = next((l for l in reversed(lines) if "[error]" in l), lines[-1] if lines else "")
    line = line.split("[error]", 1)[-1].strip()
    return line if len(line) <= 300 else line[:297] + "..."


# ----------------------------------------------------------------------------------------------
# One instance
# ----------------------------------------------------------------------------------------------

def bench_instance(path, args, kinfer, venv_py, refs):
    name = instance_name(path)
    r = {"instance": name}
    evid = path + ".evid" if os.path.exists(path + ".evid") else ""
    as_bytes = int(args.memory_limit_gb * GB)
    # kinfer's own estimate must refuse (exit 3) before the address-space limit is hit.
    kinfer_mem = f"{int(args.memory_limit_gb * 0.85 * 1024)}M"
    common = [path, "--max-memory", kinfer_mem, "--order-time", str(args.order_time)]

    # 1. sizes
    info = run_limited([kinfer, "info", "--json"] + common, args.info_timeout, as_bytes)
    j = last_json(info["stdout"]) if info["rc"] == 0 else None
    if j:
        r.update(kind=j["type"], vars=j["variables"], width=j["order"]["width"],
                 log2_max_table=j["order"]["log2_max_table"],
                 log2_max_clique=j["order"].get("log2_max_clique"),
                 log2_total_state=j["order"]["log2_total_state"],
                 est_peak_mb=j["memory"]["estimated_peak_bytes"] / 1e6,
                 fits=j["fits_memory_limit"])
    else:
        r["info_error"] = "timeout" if info["timed_out"] else tail(info["stderr"])

    # 2. kinfer pe
    pe = run_limited([kinfer, "pe", "--json"] + common, args.kinfer_timeout, as_bytes)
    r["kinfer_wall_s"] = pe["wall_s"]
    r["kinfer_peak_mb"] = pe["peak_mb"]
    j = last_json(pe["stdout"]) if pe["rc"] == 0 else None
    if pe["timed_out"]:
        r["kinfer_status"] = f"timeout >{args.kinfer_timeout:g}s"
    elif pe["rc"] == 3:
        r["kinfer_status"] = "refused (memory): " + exit3_message(pe["stderr"])
    elif pe["rc"] < 0 or pe["rc"] == 137:
        r["kinfer_status"] = f"killed by signal {-pe['rc']}: " + tail(pe["stderr"], 120)
    elif j is None:
        r["kinfer_status"] = f"exit {pe['rc']}: " + tail(pe["stderr"], 160)
    else:
        r["kinfer_status"] = "ok"
        r["kinfer_s"] = j["seconds"]
        r["kinfer_compute_s"] = j["timings"]["compute"]
        r["kinfer_plan_s"] = j["timings"]["plan"]
        r["kinfer_log10"] = j["log10_pr"] if isinstance(j["log10_pr"], float) else float("-inf")
        r["kinfer_width"] = j["order"]["width"]
        r["kinfer_order"] = j["order"].get("heuristic", "")
        r["kinfer_log2_max_table"] = j["order"]["log2_max_table"]
        r["kinfer_log2_total_state"] = j["order"]["log2_total_state"]

    # 3. pyAgrum
    if venv_py and not args.no_pyagrum:
        cmd = [venv_py, os.path.abspath(__file__), "--pyagrum-child", path, "--evidence", evid]
        py = run_limited(cmd, args.pyagrum_timeout, as_bytes)
        r["pyagrum_wall_s"] = py["wall_s"]
        r["pyagrum_peak_mb"] = py["peak_mb"]
        partial = json_lines(py["stdout"])  # the junction tree's size comes before inference
        if "log2_max_clique" in partial:
            r["pyagrum_log2_max_clique"] = partial["log2_max_clique"]
            r["pyagrum_log2_sum_cliques"] = partial["log2_sum_cliques"]
        j = partial if py["rc"] == 0 and "engine" in partial else None
        if py["timed_out"]:
            r["pyagrum_status"] = f"timeout >{args.pyagrum_timeout:g}s"
        elif j is None:
            lines = [l for l in py["stderr"].strip().splitlines() if l.strip()]
            msg = tail(lines[-1] if lines else "", 200)  # the exception, after the traceback
            if "MemoryError" in msg or "bad_alloc" in msg or "memory" in msg.lower():
                r["pyagrum_status"] = "out of memory: " + msg
            elif py["rc"] < 0:
                r["pyagrum_status"] = f"killed by signal {-py['rc']}: " + msg
            else:
                r["pyagrum_status"] = f"exit {py['rc']}: " + msg
        else:
            r["pyagrum_engine"] = j.get("engine", "")
            r["pyagrum_build_s"] = j.get("build_s")
            r["pyagrum_infer_s"] = j.get("infer_s")
            if "infer_s" in j:
                r["pyagrum_s"] = j["infer_s"]
            if "log10_pr" in j:
                r["pyagrum_status"] = "ok"
                r["pyagrum_log10"] = j["log10_pr"]
            else:
                r["pyagrum_status"] = "no answer: " + j.get("error", "?")

    if "kinfer_s" in r and "pyagrum_s" in r and r["kinfer_s"] > 0:
        r["ratio"] = r["pyagrum_s"] / r["kinfer_s"]
    ref = refs.get(name)
    r["ref_log10"] = float(ref["ref_log10_pr"]) if ref else None
    r["kinfer_vs_ref"] = agreement(r.get("kinfer_log10"), ref) if "kinfer_log10" in r else "-"
    r["pyagrum_vs_ref"] = agreement(r.get("pyagrum_log10"), ref) if "pyagrum_log10" in r else "-"
    return r


# ----------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------

COLUMNS = [  # (key, header, width, format)
    ("instance", "instance", 18, "s"),
    ("vars", "vars", 5, "d"),
    ("width", "width", 5, "d"),
    ("log2_max_table", "log2 max", 8, ".1f"),
    ("log2_total_state", "log2 total", 10, ".1f"),
    ("kinfer_s", "kinfer s", 9, ".3f"),
    ("kinfer_peak_mb", "kinfer MB", 9, ".0f"),
    ("kinfer_log10", "kinfer log10 P(e)", 17, ".6f"),
    ("pyagrum_s", "pyAgrum s", 9, ".3f"),
    ("pyagrum_build_s", "(build s)", 9, ".2f"),
    ("pyagrum_peak_mb", "pyAgrum MB", 10, ".0f"),
    ("pyagrum_log2_max_clique", "pyA log2 clique", 15, ".1f"),
    ("ratio", "ratio", 7, ".1f"),
    ("kinfer_vs_ref", "kinfer=ref", 10, "s"),
    ("pyagrum_vs_ref", "pyAgrum=ref", 11, "s"),
]

TSV_KEYS = ["instance", "kind", "vars", "width", "log2_max_table", "log2_max_clique",
            "log2_total_state", "est_peak_mb", "fits", "kinfer_status", "kinfer_s",
            "kinfer_plan_s", "kinfer_compute_s", "kinfer_wall_s", "kinfer_peak_mb", "kinfer_log10",
            "kinfer_order", "kinfer_width", "kinfer_log2_max_table", "kinfer_log2_total_state",
            "pyagrum_status", "pyagrum_engine", "pyagrum_s", "pyagrum_build_s", "pyagrum_infer_s",
            "pyagrum_wall_s", "pyagrum_peak_mb", "pyagrum_log2_max_clique",
            "pyagrum_log2_sum_cliques", "pyagrum_log10", "ratio", "ref_log10", "kinfer_vs_ref",
            "pyagrum_vs_ref", "info_error", "kinfer_commit", "run_date"]


def fmt(value, spec):
    if value is None or value == "":
        return "-"
    if spec == "s":
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return format(value, spec)


def cell(r, key, spec):
    # a failed run shows why instead of a number
    if key == "kinfer_s" and r.get("kinfer_status", "ok") != "ok":
        return short_status(r["kinfer_status"])
    if key == "pyagrum_s" and "pyagrum_status" in r and "pyagrum_s" not in r:
        return short_status(r["pyagrum_status"])
    if key == "kinfer_log10" and r.get("kinfer_status", "ok") != "ok":
        return "-"
    return fmt(r.get(key), spec)


def short_status(s):
    if s.startswith("timeout"):
        return "timeout"
    if s.startswith("refused"):
        return "no mem"
    if "memory" in s.lower():
        return "no mem"
    return "failed"


def table_lines(results):
    head = "  ".join(h.rjust(w) if s != "s" or k != "instance" else h.ljust(w)
                     for k, h, w, s in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in results:
        cells = []
        for k, h, w, s in COLUMNS:
            text = cell(r, k, s)
            cells.append(text.ljust(w) if k == "instance" else text.rjust(w))
        lines.append("  ".join(cells))
    return lines


def write_atomically(path, text):
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_tsv(path):
    """Rows of a results TSV, numbers converted back, empty cells dropped."""
    def value(text):
        for conv in (int, float):
            try:
                return conv(text)
            except ValueError:
                pass
        return text
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = []
        for line in f:
            cells = line.rstrip("\n").split("\t")
            rows.append({k: value(v) for k, v in zip(header, cells) if v != ""})
    for r in rows:  # statuses and agreement read like numbers only by accident
        for k in ("instance", "kinfer_commit", "run_date"):
            if k in r:
                r[k] = str(r[k])
    return rows


def tsv_text(results):
    rows = ["\t".join(TSV_KEYS)]
    for r in results:
        vals = []
        for k in TSV_KEYS:
            v = r.get(k)
            if v is None:
                vals.append("")
            elif isinstance(v, float):
                vals.append(f"{v:.10g}")
            else:
                vals.append(str(v).replace("\t", " ").replace("\n", " "))
        rows.append("\t".join(vals))
    return "\n".join(rows) + "\n"


def machine_description():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GB
    return f"{cpu}, {os.cpu_count()} cores, {mem_gb:.0f} GiB RAM, {platform.platform()}"


def kinfer_commit(args):
    if args.kinfer:
        return f"binary {args.kinfer} (commit unknown)"
    if args.commit:
        return f"{args.commit} (clean export of the commit)"

    def git(*a):
        return subprocess.run(["git", "-C", REPO] + list(a), capture_output=True,
                              text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "?"
    dirty = git("status", "--porcelain", "--", "engine", "io", "apps", "meson.build")
    return head + (" (+ uncommitted changes in engine/io/apps)" if dirty else "")


def markdown(results, meta):
    cols = [(k, h, s) for k, h, w, s in COLUMNS]
    out = ["# UAI benchmark: kinfer vs pyAgrum", "",
           "Produced by `scripts/bench_uai.py`; do not edit by hand (re-run it).", "",
           f"- machine: {meta['machine']}",
           f"- date: {', '.join(sorted({str(r.get('run_date', '?'))[:10] for r in results}))}",
           f"- kinfer commit: {'; '.join(sorted({str(r.get('kinfer_commit', '?')) for r in results}))}",
           f"- kinfer command: {meta['kinfer_cmd']}",
           f"- pyAgrum: {meta['pyagrum']}",
           f"- limits per run: kinfer {meta['kinfer_timeout']:g} s, pyAgrum "
           f"{meta['pyagrum_timeout']:g} s, address space {meta['memory_limit_gb']:g} GB",
           f"- raw results: `{meta['tsv']}`", "",
           "| " + " | ".join(h for k, h, s in cols) + " |",
           "|" + "|".join("---" if k == "instance" or s == "s" else "---:" for k, h, s in cols) + "|"]
    for r in results:
        out.append("| " + " | ".join(cell(r, k, s) for k, h, s in cols) + " |")
    failures = [r for r in results if r.get("kinfer_status", "ok") != "ok"
                or r.get("pyagrum_status", "ok") != "ok"]
    if failures:
        out += ["", "Runs that gave no answer:", ""]
        for r in failures:
            if r.get("kinfer_status", "ok") != "ok":
                out.append(f"- {r['instance']}: kinfer {r['kinfer_status']}")
            if r.get("pyagrum_status", "ok") != "ok":
                out.append(f"- {r['instance']}: pyAgrum {r['pyagrum_status']}")
    out += ["", "## Notes", ""] + [f"- {n}" for n in meta["notes"]]
    return "\n".join(out) + "\n"


NOTES = [
    "Columns: vars = variables; width, log2 max (largest table, entries) and log2 total "
    "(sum of all tables' entries) are those of the elimination order `kinfer info` finds; "
    "kinfer s = read + order search + compute, as kinfer reports it; MB = peak resident set of "
    "the child process (wait4); ratio = pyAgrum s / kinfer s (above 1: kinfer faster).",
    "pyAgrum s = LazyPropagation's makeInference + evidenceProbability (triangulation, junction "
    "tree, propagation), measured inside the child; the ratio uses it. (build s) is the time to "
    "build the model through pyAgrum's API, shown apart because BayesNet.add is linear in the "
    "number of nodes already there (quadratic overall), which is an API cost, not inference. "
    "Python start-up, `import pyagrum` and parsing the UAI text in Python are left out; kinfer's "
    "seconds include reading the file and searching an order.",
    "pyAgrum's UAI MARKOV reader (`loadMRF`, 3.3.1) stores each factor's scope as a set and "
    "fills the table in its own variable order, so any factor whose scope is not listed in that "
    "order is read permuted (it also parses values as 32-bit floats); its answers are then wrong. "
    "The benchmark therefore parses the UAI file itself and builds the model through pyAgrum's "
    "API. ShaferShenoyMRFInference.evidenceProbability returns Z_e/Z, not Z_e, so every network "
    "is given to pyAgrum as a Bayesian network whose exact P(evidence) is Z_e: variables are "
    "roots with all-ones tables, each factor f gets a binary child with P(1 | scope) = f/max f, "
    "observed; the moral graph is the Markov network's, so the junction tree is the same. "
    "Dividing by max f keeps pyAgrum's double-precision tables in range; the answer itself "
    "can still overflow or underflow a double, which is reported.",
    "pyA log2 clique = log2 of the entries of the largest clique of pyAgrum's junction tree "
    "(its default triangulation, on the same graph; printed before inference, so it is known "
    "even when inference then runs out of memory). kinfer's log2 max is after evidence "
    "reduction and its pruning of domain values no factor supports, which pyAgrum does not do; "
    "on the linkage networks the two together make pyAgrum's largest clique 2^8 to 2^13 times "
    "kinfer's largest table. Cardinality-1 variables (evidence absorbed in the linkage and "
    "pedigree1/50 files) are given to pyAgrum as hard evidence on their only state, which is "
    "exact and keeps them out of its triangulation.",
    "kinfer's order search is a stochastic search with a time budget (--order-time), so its "
    "order, and hence its plan, can differ between the `info` run that gives the sizes and the "
    "`pe` run, all the more under background load; the TSV has both (kinfer_width, "
    "kinfer_log2_max_table are the pe run's).",
    "Agreement (=ref) is |answer - reference| <= half a unit of the reference's last printed "
    "digit (REFERENCES.tsv).",
    "Both engines use all cores and ran one after the other on each instance in the same run, "
    "so the ratios were measured side by side; absolute timings carry whatever else the machine "
    "was running.",
    "Every child ran under a wall-clock timeout and an address-space limit (RLIMIT_AS); kinfer "
    "is given --max-memory at 85% of that limit so it refuses a plan (exit 3) rather than "
    "fail an allocation.",
]


# ----------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("instances", nargs="*", help="instance names or paths (default: every *.uai)")
    ap.add_argument("--data", default=DEFAULT_DATA,
                    help="folder of the UAI instances and their REFERENCES.tsv "
                         "(default: the repository's data/uai)")
    ap.add_argument("--kinfer", help="kinfer binary (default: build one in --build-dir)")
    ap.add_argument("--build-dir", default="build", help="release build folder (default: build)")
    ap.add_argument("--commit", help="benchmark this commit (exported with git archive and built "
                    "under --build-dir) instead of the working tree")
    ap.add_argument("--jobs", type=int, default=2, help="ninja -j when building kinfer")
    ap.add_argument("--kinfer-timeout", type=float, default=600)
    ap.add_argument("--pyagrum-timeout", type=float, default=300)
    ap.add_argument("--info-timeout", type=float, default=120)
    ap.add_argument("--memory-limit-gb", type=float, default=16, help="address-space limit per run")
    ap.add_argument("--order-time", type=float, default=5.0, help="kinfer --order-time")
    ap.add_argument("--no-pyagrum", action="store_true", help="kinfer only")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "out", "uai"), help="results folder")
    ap.add_argument("--label", default=socket.gethostname(), help="results-<label>.tsv")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other instances' rows of an existing results TSV (to redo a few)")
    ap.add_argument("--pyagrum-child", metavar="NETWORK", help=argparse.SUPPRESS)
    ap.add_argument("--evidence", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.pyagrum_child:
        pyagrum_child(args.pyagrum_child, args.evidence)
        return

    kinfer = ensure_kinfer(args)
    venv_py = None if args.no_pyagrum else ensure_venv()
    pyagrum_version = "not run"
    if venv_py:
        pyagrum_version = subprocess.run(
            [venv_py, "-c", "import pyagrum; print(pyagrum.__version__)"],
            capture_output=True, text=True).stdout.strip() + " (PyPI, scripts/.venv)"
    refs = read_references(args.data)
    paths = resolve_instances(args.instances, args.data)

    tsv = os.path.join(args.out, f"results-{args.label}.tsv")
    commit = kinfer_commit(args)
    meta = {"machine": machine_description(),
            "kinfer_cmd": f"`kinfer pe --json NETWORK --max-memory "
                          f"{int(args.memory_limit_gb * 0.85 * 1024)}M --order-time "
                          f"{args.order_time:g}` (release build)",
            "pyagrum": pyagrum_version, "kinfer_timeout": args.kinfer_timeout,
            "pyagrum_timeout": args.pyagrum_timeout, "memory_limit_gb": args.memory_limit_gb,
            "tsv": os.path.relpath(tsv, args.out), "notes": NOTES}
    kept = {}
    if args.merge and os.path.exists(tsv):
        kept = {r["instance"]: r for r in read_tsv(tsv)}

    print("\n".join(table_lines([])), flush=True)
    results = []
    for path in paths:
        log(f"... {instance_name(path)}")
        r = bench_instance(path, args, kinfer, venv_py, refs)
        r["kinfer_commit"] = commit
        r["run_date"] = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        results.append(r)
        print(table_lines([r])[2], flush=True)
        if not args.no_write:  # after every instance, so an interrupted run keeps what it did
            kept[r["instance"]] = r
            rows = sorted(kept.values(), key=lambda x: x["instance"])
            write_atomically(tsv, tsv_text(rows))
            write_atomically(os.path.join(args.out, "README.md"), markdown(rows, meta))

    for r in results:
        if r.get("kinfer_status", "ok") != "ok":
            print(f"  {r['instance']}: kinfer {r['kinfer_status']}")
        if r.get("pyagrum_status", "ok") != "ok":
            print(f"  {r['instance']}: pyAgrum {r['pyagrum_status']}")
    if not args.no_write:
        log(f"wrote {tsv} and {os.path.join(args.out, 'README.md')}")


if __name__ == "__main__":
    main()
