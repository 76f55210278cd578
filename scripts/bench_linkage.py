#!/usr/bin/env python3
"""kinfer lod against FASTLINK on simulated pedigrees of growing size and marker count.

Writes OUT/results.json and OUT/RESULTS.md (OUT: --out, default bench/out/linkage). Four parts:
  1. side by side (MLINK, trait + 1..7 markers, FASTLINK's 8-locus limit): CPU seconds of
     FASTLINK (unknown + mlink) and of kinfer (--threads 1), their ratio, and that the total
     ln L agree;
  2. what FASTLINK cannot run: multipoint location scores across 20 and 40 markers, and
     pedigrees with many marriage loops: kinfer's time and peak memory;
  3. compile once, evaluate many: a grid of thetas in one run against one run per theta;
  4. dense maps: multipoint across 40 markers and 250 SNPs by the Lander-Green chain.

`scripts/bench.py linkage` runs parts 1 and 3, `scripts/bench.py linkage-big` parts 2 and 4.
Usage: scripts/bench_linkage.py [--kinfer build/apps/kinfer] [--quick] [--out bench/out/linkage]
Every run is limited in time (--timeout) and resident memory (--max-rss-gb).
"""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

# ---------------------------------------------------------------------------------------------
# Simulation: pedigrees, a map, gene dropping.


def make_family(rng, target, loops):
    """People as dicts (id, fa, mo, sex), parents before children. `loops` marriages between
    descendants of the first couple (cousins and the like) make marriage loops."""
    people = [dict(id=1, fa=0, mo=0, sex=1), dict(id=2, fa=0, mo=0, sex=2)]
    couples = [(1, 2)]
    def add(fa, mo, sex):
        people.append(dict(id=len(people) + 1, fa=fa, mo=mo, sex=sex))
        return people[-1]['id']
    i = 0
    while len(people) < target and i < len(couples):
        fa, mo = couples[i]
        i += 1
        if len(people) + 2 > target:
            break
        if fa == 0 or mo == 0:  # the spouse from outside joins only when children follow
            c = fa or mo
            s = add(0, 0, 3 - people[c - 1]['sex'])
            fa, mo = (c, s) if people[c - 1]['sex'] == 1 else (s, c)
        for _ in range(rng.randint(2, 4)):
            if len(people) >= target:
                break
            c = add(fa, mo, rng.randint(1, 2))
            if rng.random() < 0.7:
                couples.append((c, 0) if people[c - 1]['sex'] == 1 else (0, c))
    made = 0
    tries = 0
    while made < loops and tries < 1000:
        tries += 1
        nf = [p for p in people if p['fa']]
        x, y = rng.choice(nf), rng.choice(nf)
        if x['sex'] == y['sex'] or (x['fa'], x['mo']) == (y['fa'], y['mo']):
            continue
        fa, mo = (x, y) if x['sex'] == 1 else (y, x)
        if any(p['fa'] == fa['id'] and p['mo'] == mo['id'] for p in people):
            continue
        for _ in range(rng.randint(1, 2)):
            add(fa['id'], mo['id'], rng.randint(1, 2))
        made += 1
    return people


def frequencies(rng, n):
    w = [rng.random() + 0.3 for _ in range(n)]
    f = [round(x / sum(w), 4) for x in w]
    f[-1] = round(1 - sum(f[:-1]), 4)
    return f


def simulate(rng, n_peds, size, n_markers, n_alleles, loops, cm_step):
    """Locus file text and pedigree records: trait (2 alleles, dominant, 1 liability class)
    at map position 1, markers every `cm_step` cM after it."""
    theta = 0.5 * (1 - math.exp(-2 * cm_step / 100))
    freqs = [[0.99, 0.01]] + [frequencies(rng, n_alleles) for _ in range(n_markers)]
    nl = n_markers + 1
    peds = []
    for ped in range(1, n_peds + 1):
        people = make_family(rng, size, loops)
        hap = {}
        founders = [p for p in people if not p['fa']]
        carrier = founders[0]['id']  # one founder carries the disease allele: a linked family
        for p in people:
            if not p['fa']:
                h = [[rng.choices(range(1, len(f) + 1), f)[0] for f in freqs] for _ in range(2)]
                if p['id'] == carrier:
                    h[0][0] = 2
                hap[p['id']] = h
                continue
            h = []
            for par in (p['fa'], p['mo']):
                src = hap[par]
                side = rng.randint(0, 1)
                g = []
                for k in range(nl):
                    if k and rng.random() < theta:
                        side ^= 1
                    g.append(src[side][k])
                h.append(g)
            hap[p['id']] = h
        recs = []
        for p in people:
            h = hap[p['id']]
            dis = (h[0][0] == 2) + (h[1][0] == 2)
            pen = [0.01, 0.9, 0.9][dis]
            status = 2 if rng.random() < pen else 1
            if not p['fa'] and rng.random() < 0.5:
                status = 0
            typed = rng.random() < (0.5 if not p['fa'] else 0.85)
            geno = [(h[0][k], h[1][k]) if typed else (0, 0) for k in range(1, nl)]
            recs.append(dict(p, status=status, geno=geno))
        peds.append(recs)
    dat = [f"{nl} 0 0 5 << NO. OF LOCI, RISK LOCUS, SEXLINKED (IF 1) PROGRAM",
           "0 0.0 0.0 0 << MUT LOCUS, MUT RATE, HAPLOTYPE FREQUENCIES (IF 1)",
           " ".join(str(i) for i in range(1, nl + 1)),
           "1 2 << AFFECTION, NO. OF ALLELES # trait",
           "0.99 0.01 << GENE FREQUENCIES", "1 << NO. OF LIABILITY CLASSES",
           "0.01 0.9 0.9 << PENETRANCES"]
    for k in range(1, nl):
        dat.append(f"3 {n_alleles} << ALLELE NUMBERS, NO. OF ALLELES # m{k}")
        dat.append(" ".join(f"{x:.4f}" for x in freqs[k]))
    dat.append("0 0 << SEX DIFFERENCE, INTERFERENCE")
    dat.append(" ".join(f"{theta:.6f}" for _ in range(nl - 1)) + " << RECOMBINATION VALUES")
    dat.append("1 0.1 0.4 << REC VARIED, INCREMENT, FINISHING VALUE")
    return "\n".join(dat) + "\n", peds


def post_makeped(peds, breakers=True):
    """Post-makeped text with offspring and sibling pointers. With `breakers`, every marriage
    loop is broken FASTLINK's way: the first spouse of each loop marriage gets a founder copy
    that parents that marriage's children (column 9 = loop number + 1)."""
    lines = []
    for pi, recs in enumerate(peds, 1):
        people = [dict(r) for r in recs]
        if breakers:
            n_loop = 0
            # A marriage is a loop marriage when both spouses are non-founders.
            seen = set()
            byid = {p['id']: p for p in people}
            for c in list(people):
                if not c['fa'] or (c['fa'], c['mo']) in seen:
                    continue
                seen.add((c['fa'], c['mo']))
                fa, mo = byid[c['fa']], byid[c['mo']]
                if fa['fa'] and mo['fa']:
                    spouse = fa if not fa.get('pro') else mo
                    if spouse.get('pro'):
                        continue  # both already break other loops; rare, leave it
                    key = 'fa' if spouse is fa else 'mo'
                    n_loop += 1
                    spouse['pro'] = n_loop + 1
                    copy = dict(spouse, id=len(people) + 1, fa=0, mo=0, pro=n_loop + 1)
                    people.append(copy)
                    byid[copy['id']] = copy
                    for k in people:
                        if k['fa'] == fa['id'] and k['mo'] == mo['id']:
                            k[key] = copy['id']
        for p in people:
            kids = [q['id'] for q in people if p['id'] in (q['fa'], q['mo'])]
            def next_sib(key):
                if not p[key]:
                    return 0
                later = [q['id'] for q in people if q[key] == p[key] and q['id'] > p['id']]
                return min(later) if later else 0
            cols = [pi, p['id'], p['fa'], p['mo'], min(kids) if kids else 0, next_sib('fa'),
                    next_sib('mo'), p['sex'], p.get('pro', 0), p['status']]
            for a, b in p['geno']:
                cols += [a, b]
            lines.append(" ".join(str(c) for c in cols))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Running and measuring.


def group_rss_mb(pgid):
    """Resident memory of every process in process group `pgid`, MB."""
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 of stat: the process group
                continue
            with open(f"/proc/{d}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
        except (OSError, IndexError, ValueError):
            pass
    return total


def timed(cmd, cwd, timeout, rss_gb):
    """(rc, wall s, cpu s, max RSS MB, stdout) of a shell command. It runs in its own process
    group, which is killed past `timeout` seconds or `rss_gb` of resident memory (FASTLINK
    reserves tens of GB of address space it never touches, so an address-space limit would
    stop it for nothing). rc 124: timeout; rc 137: memory. CPU time (user + system, of the
    command and everything it waited for) comes from wait4, to the microsecond."""
    out = tempfile.TemporaryFile()
    t0 = time.time()
    p = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, stdout=out, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    rc, killed = None, None
    while rc is None:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            rc = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.05)
        over_time = time.time() - t0 > timeout
        if killed is None and (over_time or group_rss_mb(p.pid) > rss_gb * 1024):
            killed = 124 if over_time else 137
            os.killpg(p.pid, 9)
    p.returncode = rc
    wall = time.time() - t0
    cpu = ru.ru_utime + ru.ru_stime
    rss = ru.ru_maxrss / 1024
    out.seek(0)
    return (killed or rc), wall, cpu, rss, out.read().decode()


def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def fastlink_totals(outfile):
    """Total ln L of each evaluation in FASTLINK's outfile.dat."""
    tot = []
    for line in open(outfile):
        if line.startswith("TOTALS"):
            tot.append(float(line.split()[1]))
    return tot


def repeated(fn):
    """Runs fn() until 0.5 CPU s have been spent (at most 10 times; /usr/bin/time counts in
    10 ms steps) and reports the mean CPU and wall time of one run."""
    runs, cpu, wall = [], 0.0, 0.0
    while True:
        r = fn()
        runs.append(r)
        if r['rc'] != 0:
            return r
        cpu += r['cpu']
        wall += r['wall']
        if cpu >= 0.5 or len(runs) >= 10:
            break
    r = dict(runs[-1])
    r['cpu'], r['wall'], r['repeats'] = cpu / len(runs), wall / len(runs), len(runs)
    return r


def run_fastlink(dat, post, args):
    return repeated(lambda: run_fastlink_once(dat, post, args))


def run_fastlink_once(dat, post, args):
    d = tempfile.mkdtemp(prefix="bench-fastlink-")
    try:
        open(os.path.join(d, "datafile.dat"), "w").write(dat)
        open(os.path.join(d, "pedfile.dat"), "w").write(post)
        rc, wall, cpu, rss, _ = timed("unknown >/dev/null 2>&1 && mlink >/dev/null 2>&1", d,
                                      args.timeout, args.max_rss_gb)
        tot = fastlink_totals(os.path.join(d, "outfile.dat")) if rc == 0 else []
        return dict(rc=rc, wall=wall, cpu=cpu, rss_mb=rss, totals=tot)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_kinfer(args, dat, ped, extra):
    return repeated(lambda: run_kinfer_once(args, dat, ped, extra))


def run_kinfer_once(args, dat, ped, extra):
    d = tempfile.mkdtemp(prefix="bench-kinfer-")
    try:
        open(os.path.join(d, "k.dat"), "w").write(dat)
        open(os.path.join(d, "k.ped"), "w").write(ped)
        prefix = (shq(os.path.abspath(args.kinfer_prefix)) + " ") if args.kinfer_prefix else ""
        kin = args.kinfer if args.kinfer_prefix else os.path.abspath(args.kinfer)
        quiet = "" if " -v" in extra else "-q "
        extra = extra.replace(" -v", "")
        cmd = f"{prefix}{shq(kin)} {'-v ' if not quiet else ''}lod {quiet}--ped k.ped --dat k.dat --json {extra} 2>err"
        rc, wall, cpu, rss, out = timed(cmd, d, args.timeout, args.max_rss_gb)
        res = dict(rc=rc, wall=wall, cpu=cpu, rss_mb=rss)
        if rc not in (0, 124, 137) and os.path.exists(os.path.join(d, "err")):
            res['error'] = open(os.path.join(d, "err")).read().strip().splitlines()[-1][:400]
        if not quiet and os.path.exists(os.path.join(d, "err")):
            res["bits"] = "; ".join(l.split("] ", 2)[-1].strip() for l in open(os.path.join(d, "err"))
                                    if "inheritance vector of" in l)
        if rc == 0:
            j = json.loads(out)
            res['notes'] = j.get('notes', [])
            res['totals'] = [j['baseline']['total']['ln_l']] + [e['total']['ln_l'] for e in j['evaluations']]
            res['lods'] = [e['total'].get('lod') for e in j['evaluations']]
            res['timings'] = j['timings']
            res['largest_plan'] = j['largest_plan']
        return res
    finally:
        shutil.rmtree(d, ignore_errors=True)


def status(r):
    if r['rc'] == 0:
        return f"{r['cpu']:.3f}"
    return {124: "timeout", 137: "over memory limit", -1: "not run"}.get(r['rc'], f"failed (rc {r['rc']})")


def close(a, b, tol=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1, abs(y)) for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinfer", default="build/apps/kinfer")
    ap.add_argument("--out", default="bench/out/linkage")
    ap.add_argument("--quick", action="store_true", help="a few small cases only")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--max-rss-gb", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--parts", default="1,2,3,4",
                    help="which parts to run (the others are kept from an earlier results.json)")
    ap.add_argument("--big-timeout", type=int, default=1800, help="time limit of part 2's runs")
    ap.add_argument("--kinfer-prefix", default="",
                    help="a wrapper to run kinfer through (the GPU machine's bundle: .device-bundle/run, "
                         "with --kinfer apps/kinfer)")
    ap.add_argument("--big-options", default="--max-memory 4G",
                    help="extra kinfer options of part 2 (e.g. '--device auto --max-memory 64G')")
    ap.add_argument("--only", default="", help="part 2: just these cases, PEOPLExMARKERS[,...] (e.g. 20x40)")
    args = ap.parse_args()
    parts = {int(x) for x in args.parts.split(",")}
    if 1 in parts and not shutil.which("mlink"):
        sys.exit("FASTLINK (Debian package fastlink) is not installed")
    os.makedirs(args.out, exist_ok=True)
    kthreads = "--threads 1"
    parts = {int(x) for x in args.parts.split(",")}
    results = dict(machine=os.uname().nodename, cpus=os.cpu_count(), side_by_side=[], kinfer_only=[], grid=[])
    old = os.path.join(args.out, "results.json")
    if os.path.exists(old):
        prev = json.load(open(old))
        for k, part in (("side_by_side", 1), ("kinfer_only", 2), ("grid", 3), ("dense", 4)):
            if part not in parts:
                results[k] = prev.get(k, [])

    # 1. Side by side.
    sizes = [10, 20] if args.quick else [10, 20, 40]
    markers = [1, 3] if args.quick else [1, 3, 5, 7]
    print(f"{'case':34} {'FASTLINK cpu s':>14} {'kinfer cpu s':>12} {'ratio':>8}  agree")
    for size in (sizes if 1 in parts else []):
        fl_gave_up = None  # FASTLINK's time grows with the loci: after a timeout, skip the rest
        for m in markers:
            for loops in ([0, 1] if size >= 20 and m <= 3 else [0]):
                rng = random.Random(f"{args.seed}-{size}-{m}-{loops}")
                dat, peds = simulate(rng, 3, size, m, 4, loops, 5.0)
                post = post_makeped(peds)
                name = f"3 peds x {size} people, {m + 1} loci" + (f", {loops} loop each" if loops else "")
                if fl_gave_up is None:
                    fl = run_fastlink(dat, post, args)
                    if fl['rc'] in (124, 137):
                        fl_gave_up = m + 1
                else:
                    fl = dict(rc=-1, wall=float('nan'), cpu=float('nan'), rss_mb=float('nan'), totals=[],
                              note=f"not run: FASTLINK hit the limit at {fl_gave_up} loci")
                ki = run_kinfer(args, dat, post, kthreads)
                if loops:  # FASTLINK's loop breakers add a constant: compare LOD shapes
                    agree = (fl['rc'] == 0 and ki['rc'] == 0 and
                             close([t - fl['totals'][0] for t in fl['totals']],
                                   [t - ki['totals'][0] for t in ki['totals']]))
                else:
                    agree = fl['rc'] == 0 and ki['rc'] == 0 and close(fl['totals'], ki['totals'])
                ratio = fl['cpu'] / ki['cpu'] if fl['rc'] == 0 and ki['rc'] == 0 and ki['cpu'] > 0 else float('nan')
                print(f"{name:34} {status(fl):>14} {status(ki):>12} {ratio:8.2f}  "
                      f"{'yes' if agree else ('-' if fl['rc'] else 'NO')}", flush=True)
                results['side_by_side'].append(dict(case=name, people=size, pedigrees=3, loci=m + 1, loops=loops,
                                                    fastlink=fl, kinfer=ki, ratio=ratio, agree=agree))

    # 2. Beyond FASTLINK: many markers (multipoint across the whole map), many loops.
    big = [(20, 20, 0), (30, 20, 0), (20, 30, 0), (20, 40, 0), (60, 10, 4)] if not args.quick else [(20, 20, 0)]
    if args.only:
        big = [b for b in big if f"{b[0]}x{b[1]}" in args.only.split(",")]
    for size, m, loops in (big if 2 in parts else []):
        rng = random.Random(f"{args.seed}-big-{size}-{m}-{loops}")
        dat, peds = simulate(rng, 3, size, m, 4, loops, 5.0)
        ped = post_makeped(peds, breakers=False)
        span = 5.0 * (m - 1)
        # Both cores here: these runs are about what kinfer can do, not a ratio.
        extra = f"{args.big_options} --program linkmap --moving 1 --positions -10:{span + 10:g}:5"
        name = f"3 peds x {size} people, {m} markers" + (f", {loops} loops each" if loops else "")
        big_args = argparse.Namespace(**vars(args))
        big_args.timeout = args.big_timeout
        ki = run_kinfer_once(big_args, dat, ped, extra)
        lods = [x for x in ki.get('lods', []) if isinstance(x, (int, float))]
        peak = max(lods, default=float('nan'))
        print(f"{name:40} kinfer {status(ki)} cpu s, wall {ki['wall']:.2f} s, RSS {ki['rss_mb']:.0f} MB, "
              f"{len(ki.get('lods', []))} positions, peak LOD {peak:.2f}", flush=True)
        results['kinfer_only'].append(dict(case=name, people=size, markers=m, loops=loops, kinfer=ki, peak_lod=peak,
                                           options=args.big_options, machine=machine()))
        finish(results, args)  # after every case: a time limit cuts no finished one

    # 4. Dense maps (issue 14): multipoint by the inheritance-vector chain. The 40-marker case
    # is part 2's pedigrees (same seed) at positions every 2 cM; the SNP case is one pedigree
    # of 20 people with 250 biallelic markers 0.5 cM apart, positions every 1 cM.
    dense = [(3, 20, 40, 4, 5.0, 2.0, f"{args.seed}-big-20-40-0"),
             (1, 20, 250, 2, 0.5, 1.0, f"{args.seed}-snp-20-250")]
    for npeds, size, m, na, step, grid, seed in (dense if 4 in parts else []):
        rng = random.Random(seed)
        dat, peds = simulate(rng, npeds, size, m, na, 0, step)
        ped = post_makeped(peds, breakers=False)
        span = step * (m - 1)
        extra = f"--max-memory 4G --program linkmap --moving 1 --positions -5:{span + 5:g}:{grid:g}"
        name = f"{npeds} ped{'s' if npeds > 1 else ''} x {size} people, {m} markers ({na} alleles, {step:g} cM apart), every {grid:g} cM"
        big_args = argparse.Namespace(**vars(args))
        big_args.timeout = args.big_timeout
        ki = run_kinfer_once(big_args, dat, ped, extra + " -v")
        lods = [x for x in ki.get('lods', []) if isinstance(x, (int, float))]
        print(f"{name:60} kinfer {status(ki)} cpu s, wall {ki['wall']:.2f} s, RSS {ki['rss_mb']:.0f} MB, "
              f"{len(ki.get('lods', []))} positions, {ki.get('bits', '')}", flush=True)
        results.setdefault('dense', [])
        results['dense'] = [d for d in results['dense'] if d['case'] != name]
        results['dense'].append(dict(case=name, kinfer=ki, peak_lod=max(lods, default=float('nan')),
                                     machine=machine(), options=extra))
        finish(results, args)

    # 3. A grid of thetas: one run against one run per theta.
    if 3 not in parts:
        return finish(results, args)
    rng = random.Random(f"{args.seed}-grid")
    dat, peds = simulate(rng, 3, 20, 5, 4, 0, 5.0)
    post = post_makeped(peds)
    thetas = [round(0.01 * i, 2) for i in range(0, 51)]
    one = run_kinfer(args, dat, post, f"{kthreads} --theta 0:0.5:0.01")
    each = 0.0
    for t in thetas:
        each += run_kinfer_once(args, dat, post, f"{kthreads} --theta {t}")['cpu']
    print(f"grid of {len(thetas)} thetas, 6 loci: one run {one['cpu']:.2f} cpu s, "
          f"{len(thetas)} runs {each:.2f} cpu s ({each / one['cpu']:.1f}x)")
    results['grid'].append(dict(thetas=len(thetas), one_run_cpu=one['cpu'], separate_runs_cpu=each,
                                one_run_timings=one.get('timings')))

    finish(results, args)


def finish(results, args):
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    write_markdown(results, os.path.join(args.out, "RESULTS.md"))
    print("wrote", os.path.join(args.out, "results.json"), "and RESULTS.md")


def machine():
    """CPU count and, where nvidia-smi answers, the GPU."""
    gpu = ""
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    return f"{os.cpu_count()} CPUs" + (f", {gpu}" if gpu else "")


def write_markdown(r, path):
    L = ["# kinfer lod vs FASTLINK", "",
         f"Machine: {r['cpus']} CPUs (CPU seconds, user + system, are reported rather than wall "
         "time, which other work on the machine moves). kinfer runs with --threads 1 and its "
         "default order search; FASTLINK is Debian's 4.1P (`unknown` + `mlink`). Generated by "
         "`scripts/bench_linkage.py`; each case is 3 simulated pedigrees, a dominant trait and "
         "4-allele markers 5 cM apart, MLINK over theta 0.1..0.4 plus the baseline.", "",
         "## Side by side", "",
         "| case | FASTLINK cpu s | kinfer cpu s | FASTLINK / kinfer | ln L agree |", "|---|---|---|---|---|"]
    for c in r['side_by_side']:
        fl = c['fastlink']
        fls = fl.get('note') or status(fl)
        ratio = f"{c['ratio']:.2f}" if c['ratio'] == c['ratio'] else "-"
        agree = 'yes' if c['agree'] else ('-' if fl['rc'] else 'no')
        L.append(f"| {c['case']} | {fls} | {status(c['kinfer'])} | {ratio} | {agree} |")
    L += ["", "## What FASTLINK cannot run", "",
          "Multipoint location scores (`--program linkmap --positions`, every 5 cM from 10 cM "
          "before the first marker to 10 cM after the last, both cores) and pedigrees with several "
          "marriage loops (no loop breakers given).", "",
          "| case | machine, kinfer options | kinfer cpu s | wall s | peak RSS MB | positions | plans (order searches) | largest table | peak LOD |",
          "|---|---|---|---|---|---|---|---|---|"]
    for c in r['kinfer_only']:
        k = c['kinfer']
        how = f"{c.get('machine', str(r['cpus']) + ' CPUs')}, `{c.get('options', '--max-memory 4G')}`"
        if k['rc'] != 0:
            L.append(f"| {c['case']} | {how} | {status(k)} {k.get('error', '')} | {k['wall']:.0f} | | | | | |")
            continue
        L.append(f"| {c['case']} | {how} | {k['cpu']:.2f} | {k['wall']:.2f} | {k['rss_mb']:.0f} | {len(k['lods'])} | "
                 f"{k['timings']['plans']} | 2^{k['largest_plan']['log2_max_table']:.1f} | {c['peak_lod']:.2f} |")
    if r.get('dense'):
        L += ["", "## Dense maps: multipoint by inheritance vectors", "",
              "`--program linkmap --moving 1 --positions` over the whole map, both cores (`--threads` "
              "default), `--max-memory 4G`. Each pedigree whose inheritance vector has at most 24 bits "
              "(meioses of the people that matter, less one per founder) goes through the Lander-Green "
              "chain of linkage/inheritance.hpp. CPU s is user + system of the whole run; wall s depends "
              "on the machine's load. Through the network instead, the 40-marker case would need "
              "2^28-entry tables (the table above).", "",
              "| case | machine | kinfer cpu s | wall s | peak RSS MB | positions | bits per pedigree | peak LOD |",
              "|---|---|---|---|---|---|---|---|"]
        for c in r['dense']:
            k = c['kinfer']
            bits = k.get('bits', '').replace('pedigree ', 'ped ')
            if k['rc'] != 0:
                L.append(f"| {c['case']} | {c['machine']} | {status(k)} {k.get('error', '')} | {k['wall']:.0f} | | | {bits} | |")
                continue
            L.append(f"| {c['case']} | {c['machine']} | {k['cpu']:.2f} | {k['wall']:.2f} | {k['rss_mb']:.0f} | "
                     f"{len(k['lods'])} | {bits} | {c['peak_lod']:.2f} |")
    L += ["", "## Compile once, evaluate many", ""]
    for g in r['grid']:
        t = g['one_run_timings'] or {}
        L.append(f"{g['thetas']} thetas on 3 pedigrees x 20 people, 6 loci: one run takes {g['one_run_cpu']:.2f} "
                 f"CPU s against {g['separate_runs_cpu']:.2f} CPU s for one run per theta "
                 f"({g['separate_runs_cpu'] / g['one_run_cpu']:.1f}x). In the one run (kinfer's own wall-clock "
                 f"split) the 3 plans take {t.get('plan', 0):.3f} s once and the {t.get('runs', 0)} pedigree "
                 f"evaluations {t.get('evaluate', 0):.3f} s; each separate run pays for parsing, genotype "
                 f"elimination, the network and the order search again.")
    open(path, "w").write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
