#!/usr/bin/env python3
"""`kinfer pe` under a --max-memory below a network's unconditioned need (halfway between the
floor pe refuses below and the unconditioned estimate, both from `kinfer info`): it conditions
instead of refusing, the process's peak RSS (GNU time's, of kinfer alone) stays under the limit,
and the answer equals the UAI reference (data/uai/REFERENCES.tsv). A limit that not even conditioning
can meet is refused with exit 3. `kinfer lod` on a dense map (the Lander-Green chain, 1.4 GiB of
emission tables) under a limit of half that: within it, the same ln L as without a limit.
Run by meson with KINFER_EXE and KINFER_DATA set."""
import json
import os
import subprocess
import sys
import tempfile

from support import EXE, check, finish, network, references

GNU_TIME = "/usr/bin/time"  # scripts/install-deps.sh installs it (Debian package time)


def run_measured(args):
    """Runs kinfer with args; returns (exit code, stdout, stderr, peak RSS in bytes).

    The peak RSS is GNU time's (%M) of kinfer itself: a process started from Python inherits
    Python's high-water RSS through fork and exec (wait4's ru_maxrss of /bin/true run from here
    is Python's ~14 MiB), which would hide whether kinfer stays under a limit below that."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r") as rss:
        p = subprocess.Popen([GNU_TIME, "-f", "%M", "-o", rss.name, EXE] + args, stdout=out,
                             stderr=err)
        p.wait()
        out.seek(0)
        err.seek(0)
        kib = rss.read().strip().splitlines()
        return p.returncode, out.read().decode(), err.read().decode(), int(kib[-1]) * 1024


def pe(name, limit, extra=()):
    return run_measured(["pe", network(name), "--json"] + PE_OPTIONS + ["--max-memory", limit]
                        + list(extra))


PE_OPTIONS = ["--device", "cpu", "--threads", "2", "--order-time", "0.5"]


def forcing_limit(name):
    """A --max-memory that forces pe to condition, from kinfer's own estimates (`kinfer info`
    with pe's options, no limit): halfway between what any plan needs before computing (the
    program, the network's and the reduced tables: the floor pe refuses below) and the
    unconditioned plan's estimated peak. Returns (limit bytes, floor, unconditioned)."""
    r = subprocess.run([EXE, "info", network(name), "--json", "-q"] + PE_OPTIONS,
                       capture_output=True, text=True, check=True)
    m = json.loads(r.stdout)["memory"]
    floor = m["parts"]["process"] + m["parts"]["network"] + m["parts"]["model"]
    unconditioned = m["estimated_peak_bytes"]
    return int(floor + 0.5 * (unconditioned - floor)), floor, unconditioned


def main():
    ref = references()
    mib = 1024 * 1024
    for name in ("linkage_16", "DBN_11", "linkage_21"):
        lim, floor, estimate = forcing_limit(name)
        limit = str(lim)
        print(f"{name}: floor {floor / mib:.1f} MiB, unconditioned estimate {estimate / mib:.1f} MiB, "
              f"limit {lim / mib:.1f} MiB")
        rc, out, err, rss = pe(name, limit)
        check(rc == 0, f"{name} --max-memory {limit}: exit 0 (got {rc}: {err.strip()[-300:]})")
        if rc != 0:
            continue
        j = json.loads(out)
        check(rss <= lim, f"{name}: peak RSS {rss / mib:.1f} MiB within the limit {lim / mib:.1f} MiB")
        cond = j.get("conditioning")
        unconditioned = cond["unconditioned_peak_bytes"] if cond else j["memory"]["estimated_peak_bytes"]
        check(unconditioned > lim, f"{name}: unconditioned estimate {unconditioned / mib:.1f} MiB "
              f"is above the limit (the test forces a change)")
        check(j["memory"]["estimated_peak_bytes"] <= lim, f"{name}: estimated peak within the limit")
        r, tol = ref[name]
        check(abs(j["log10_pr"] - r) <= tol,
              f"{name}: log10 P(e) {j['log10_pr']:.6f} equals the reference {r} (within {tol})")
        if cond:
            check(cond["slices"] >= 2 and len(cond["variables"]) >= 1,
                  f"{name}: {cond['slices']} slices over {cond['variables']}")
            # the search under the limit is skipped exactly when the best order conditioned costs
            # at most 5% more than unconditioned (engine/condition.cpp, kConditionedSlack)
            first = cond["choice"].startswith("best order without a limit")
            skipped = "not searched" in cond["choice"]
            check(skipped == (first and cond["overhead"] <= 0.05),
                  f"{name}: the search under the limit skipped iff the overhead "
                  f"({100 * cond['overhead']:.1f}%) is within 5% ({cond['choice']})")
    # A limit below what the program and the tables alone need: refused with the numbers.
    rc, out, err, rss = pe("linkage_16", "4M")
    check(rc == 3 and "is below what any plan needs" in err and "the program (" in err,
          f"linkage_16 --max-memory 4M: exit 3 with the numbers (got {rc}: {err.strip()[-200:]})")
    # The dense-map chain (22 bits, 250 SNPs): its emission tables (1.4 GiB) do not fit in 700
    # MiB; the largest are recomputed when a step needs them, within the limit, same ln L.
    dense = os.path.join(os.environ["KINFER_DATA"], "linkage", "dense", "c250")
    lod = ["lod", "--ped", dense + ".ped", "--dat", dense + ".dat", "--json", "--device", "cpu",
           "--threads", "2", "--program", "linkmap", "--moving", "1", "--positions", "60", "-v"]
    rc0, out0, err0, rss0 = run_measured(lod + ["--max-memory", "8G"])
    rc, out, err, rss = run_measured(lod + ["--max-memory", "700M"])
    check(rc0 == 0 and rc == 0, f"lod c250: exit 0 with and without the limit (got {rc0}, {rc}: "
          f"{err.strip()[-300:]})")
    if rc0 == 0 and rc == 0:
        check(rss0 > 700 * mib, f"lod c250 without a limit: {rss0 / mib:.0f} MiB (the test forces "
              f"a change)")
        check(rss <= 700 * mib, f"lod c250 --max-memory 700M: peak RSS {rss / mib:.0f} MiB")
        check("recomputed" in err and " 0 without room" not in err,
              "lod c250 --max-memory 700M: loci without room recomputed (the -v log)")
        a, b = json.loads(out0), json.loads(out)
        la = [e["total"]["ln_l"] for e in a["evaluations"]]
        lb = [e["total"]["ln_l"] for e in b["evaluations"]]
        check(len(la) == len(lb) and all(abs(x - y) <= 1e-9 * max(1, abs(x)) for x, y in zip(la, lb)),
              f"lod c250: ln L {lb} under the limit equals {la}")
    # kinfer info shows the conditioning it would use
    rc, out, err, rss = run_measured(["info", network("DBN_11"), "--json", "--order-time", "0.5",
                                      "--max-memory", "24M"])
    j = json.loads(out) if rc == 0 else {}
    c = j.get("conditioning", {})
    check(rc == 0 and c.get("slices", 0) >= 2 and c.get("slice_peak_bytes", 1e99) <= 24 * mib
          and c.get("flops", 0) > 0 and "overhead" in c and j.get("fits_memory_limit") is True,
          f"info DBN_11 --max-memory 24M: conditioning shown ({c})")
    # and the GPUs it sees (none without CUDA, with the reason) and how the slices would spread
    g = j.get("gpus", {})
    spread = g.get("slice_spread", {})
    check(g.get("count") == len(g.get("devices", [None])) and (g["count"] > 0 or "why_none" in g)
          and spread.get("slices") == c.get("slices")
          and 1 <= spread.get("gpus_used", 0) <= max(1, g["count"]),
          f"info DBN_11: GPUs seen and the slices' spread over them ({g})")
    finish()


if __name__ == "__main__":
    main()
