#!/usr/bin/env python3
"""Peak RSS of `kinfer pe --json --device cpu` against its memory estimate, per network.

Each run is a child process; its peak RSS comes from os.wait4 (ru_maxrss, KiB on Linux).
Prints a TSV table: network, estimated peak, peak RSS, ratio, ln P(e) and seconds.
Usage: bench/memory/measure.py [--kinfer build/apps/kinfer] [--extra '--max-memory 16M'] NET...
"""
import argparse
import json
import os
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinfer", default="build/apps/kinfer")
    ap.add_argument("--extra", default="", help="more pe options, e.g. '--max-memory 16M'")
    ap.add_argument("nets", nargs="+")
    a = ap.parse_args()
    extra = a.extra.split()
    print("network\test_peak_MiB\tpeak_rss_MiB\trss/est\tmax_ok\tlog10_pr\tseconds\tcompute_s\tconditioning")
    for net in a.nets:
        cmd = [a.kinfer, "pe", net, "--json", "--device", "cpu", "--threads", "2"] + extra
        t0 = time.time()
        pid = os.fork()
        if pid == 0:
            fd = os.open(f"/tmp/measure-{os.getppid()}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            dn = os.open("/dev/null", os.O_WRONLY)
            os.dup2(dn, 2)
            os.execv(cmd[0], cmd)
        _, status, ru = os.wait4(pid, 0)
        secs = time.time() - t0
        rss = ru.ru_maxrss / 1024.0
        name = os.path.basename(net).split(".uai")[0]
        try:
            with open(f"/tmp/measure-{os.getpid()}.json") as f:
                j = json.load(f)
        except Exception:
            print(f"{name}\t-\t{rss:.1f}\t-\t-\texit {os.waitstatus_to_exitcode(status)}\t{secs:.2f}\t-\t-")
            sys.stdout.flush()
            continue
        est = j["memory"]["estimated_peak_bytes"] / 2**20
        ok = rss <= 1.25 * est + 64
        cond = j.get("conditioning", {})
        cs = (f"{cond['slices']} slices, est. overhead {100 * cond['overhead']:.1f}%, "
              f"unconditioned est. {cond['unconditioned_peak_bytes'] / 2**20:.1f} MiB") if cond else "-"
        print(f"{name}\t{est:.1f}\t{rss:.1f}\t{rss / est:.2f}\t{'yes' if ok else 'NO'}\t"
              f"{j['log10_pr']}\t{secs:.2f}\t{j['timings']['compute']:.2f}\t{cs}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
