#!/usr/bin/env python3
"""What `kinfer mar` and `kinfer mpe` cost against `kinfer pe` on the same network, order and
machine: the compute seconds of each (the JSON's timings.compute: pe's run, mar's two passes,
mpe's max-product pass and traceback), the best of --repeats runs, and the ratios mar/pe and
mpe/pe. Every command of a network shares one order cache (filled by a first, unmeasured pe
run), so the three run the same elimination order, all three on --device (default cpu; gpu: both
passes of mar and mpe with the GPU, docs/mar-mpe.md). Networks too large for --max-memory or
slower than --timeout are reported, not hidden.

  scripts/bench_posterior.py [--kinfer build/apps/kinfer] [--threads N] [--repeats 3]
                             [--device cpu|gpu|auto] [--data DIR]... [--out bench/out/posterior]
                             NETWORK...
NETWORK is a file, or a name found in a --data folder.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(kinfer, args, timeout):
    try:
        r = subprocess.run(kinfer + args + ["--json", "-q"], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"over {timeout} s"
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {r.stderr.strip()[-200:]}"
    return json.loads(r.stdout), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinfer", default="build/apps/kinfer")
    ap.add_argument("--threads", type=int, default=0, help="--threads of every command (0: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--max-memory", default="")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu", "auto"])
    ap.add_argument("--out", default="bench/out/posterior")
    ap.add_argument("--data", action="append", default=[],
                    help="a folder where a network given by name (NAME.uai or NAME.uai.gz) is")
    ap.add_argument("networks", nargs="+")
    a = ap.parse_args()
    kinfer = a.kinfer.split()
    os.makedirs(a.out, exist_ok=True)
    common = []
    if a.threads > 0:
        common += ["--threads", str(a.threads)]
    if a.max_memory:
        common += ["--max-memory", a.max_memory]
    rows = []
    for net in a.networks:
        for d in a.data:
            for ext in (".uai", ".uai.gz"):
                if not os.path.exists(net) and os.path.exists(os.path.join(d, net + ext)):
                    net = os.path.join(d, net + ext)
        name = os.path.basename(net).split(".uai")[0]
        cache = tempfile.mkdtemp(prefix="kinfer-posterior-orders-")
        base = [net, "--order-cache", cache] + common
        warm, why = run(kinfer, ["pe"] + base + ["--device", a.device], a.timeout)
        if warm is None:
            rows.append((name, None, None, None, why))
            print(f"{name}: {why}", file=sys.stderr)
            continue
        best = {}
        answers = {}
        note = ""
        for cmd in ("pe", "mar", "mpe"):
            extra = ["--device", a.device]
            times = []
            for _ in range(a.repeats):
                j, why = run(kinfer, [cmd] + base + extra, a.timeout)
                if j is None:
                    note += f"{cmd}: {why}; "
                    break
                times.append(j["timings"]["compute"])
                answers[cmd] = j["log10_pr"]
            best[cmd] = min(times) if times else None
        if "pe" in answers and "mar" in answers and abs(answers["pe"] - answers["mar"]) > 1e-6 * max(
                1, abs(answers["pe"])):
            note += f"mar's log10 P(e) {answers['mar']} differs from pe's {answers['pe']}; "
        rows.append((name, best.get("pe"), best.get("mar"), best.get("mpe"), note.strip("; ")))
        print(f"{name}: pe {best.get('pe')} mar {best.get('mar')} mpe {best.get('mpe')} {note}",
              file=sys.stderr)
    with open(os.path.join(a.out, "posterior.tsv"), "w") as f:
        f.write("network\tpe_s\tmar_s\tmpe_s\tmar_over_pe\tmpe_over_pe\tnote\n")
        for name, pe, mar, mpe, note in rows:
            r1 = f"{mar / pe:.2f}" if pe and mar else ""
            r2 = f"{mpe / pe:.2f}" if pe and mpe else ""
            f.write(f"{name}\t{pe or ''}\t{mar or ''}\t{mpe or ''}\t{r1}\t{r2}\t{note}\n")
    ok = [(m / p, e / p) for _, p, m, e, _ in rows if p and m and e]
    with open(os.path.join(a.out, "posterior.tsv")) as f:
        print(f.read(), end="")
    if ok:
        print(f"median mar/pe {statistics.median(x for x, _ in ok):.2f}, "
              f"max {max(x for x, _ in ok):.2f}; median mpe/pe "
              f"{statistics.median(y for _, y in ok):.2f}, max {max(y for _, y in ok):.2f} "
              f"({len(ok)} networks)")


if __name__ == "__main__":
    main()
