#!/usr/bin/env python3
"""Runs `kinfer pe NETWORK --json` under each --device, one process each, and writes one TSV row
per run: network, device, wall seconds (whole process), the JSON's plan/compute split, log10 P(e),
the reference, the estimated peak and the peak RSS (wait4's ru_maxrss of that process).

usage: measure.py --kinfer CMD --data DIR [--data DIR...] --out FILE.tsv [--devices cpu,auto]
                  [--timeout S] [--deadline S] [--extra "--max-memory 100G"] [--warm] NETWORK...

A NETWORK is a name looked up as NAME.uai or NAME.uai.gz in each --data folder in turn, or a
path. References come from the REFERENCES.tsv of the --data folders (and of their parents).
Cold by default: `--order-cache none`, so every run searches its order (a first run); --warm
leaves kinfer's default order cache on (runs after the first reuse their orders).
Besides the split, the last columns give the read time, the order search's own seconds, the
GPU's start (the part of compute_s spent waiting for the device) and the GPUs used.
Rows are appended to FILE.tsv (the header is written when the file is new).
"""
import argparse, json, os, shlex, subprocess, tempfile, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--kinfer", required=True, help="command that runs kinfer (may hold a wrapper)")
ap.add_argument("--data", action="append", required=True, help="folder of networks (repeatable)")
ap.add_argument("--out", required=True)
ap.add_argument("--devices", default="cpu,auto")
ap.add_argument("--timeout", type=float, default=120, help="seconds per run")
ap.add_argument("--deadline", type=float, default=500, help="seconds for all runs")
ap.add_argument("--extra", default="--max-memory 100G", help="more pe options, one string")
ap.add_argument("--warm", action="store_true", help="keep the default order cache on")
ap.add_argument("networks", nargs="+")
a = ap.parse_args()

refs = {}
for d in a.data:
    for folder in (d, os.path.dirname(os.path.abspath(d))):
        try:
            for line in open(os.path.join(folder, "REFERENCES.tsv")):
                f = line.rstrip("\n").split("\t")
                if len(f) > 1 and f[0] != "instance":
                    refs.setdefault(f[0], f[1])
        except OSError:
            pass


def find(net):
    """The network's file: a path as given, else NAME.uai[.gz] in the first --data folder."""
    if os.path.isfile(net):
        return net
    for d in a.data:
        for cand in (net + ".uai", net + ".uai.gz"):
            if os.path.isfile(os.path.join(d, cand)):
                return os.path.join(d, cand)
    return None


def name_of(net):
    base = os.path.basename(net)
    for ext in (".gz", ".uai"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def run(cmd, timeout):
    """(returncode or None on timeout, stdout, stderr, wall seconds, peak RSS MiB)"""
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=so, stderr=se)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        timer.cancel()
        wall = time.time() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        so.seek(0); se.seek(0)
        killed = wall >= timeout and p.returncode < 0
        return (None if killed else p.returncode), so.read(), se.read(), wall, ru.ru_maxrss / 1024.0


start = time.time()
os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
new = not os.path.exists(a.out)
out = open(a.out, "a")
if new:
    out.write("network\tdevice\twall_s\tplan_s\tcompute_s\tlog10_pr\treference\test_peak_MiB\t"
              "rss_MiB\trss_over_est\tused\test_device_MiB\tdevice_peak_MiB\tslices\tnote\tread_s\t"
              "order_s\tdevice_start_s\tgpus\n")
for given in a.networks:
    net, path = name_of(given), find(given)
    for dev in a.devices.split(","):
        if path is None:
            out.write(f"{net}\t{dev}\tERROR network not found in {', '.join(a.data)}\n")
            out.flush(); continue
        left = a.deadline - (time.time() - start)
        if left < 15:
            out.write(f"{net}\t{dev}\tSKIPPED (deadline)\n"); out.flush(); continue
        cmd = shlex.split(a.kinfer) + ["pe", path, "--json", "--device", dev] + shlex.split(a.extra)
        if not a.warm:
            cmd += ["--order-cache", "none"]
        lim = min(a.timeout, left - 10)
        rc, so, se, wall, rss = run(cmd, lim)
        if rc is None:
            out.write(f"{net}\t{dev}\tTIMEOUT {lim:.0f}s\t\t\t\t{refs.get(net, '')}\t\t{rss:.0f}\n")
            out.flush(); continue
        try:
            j = json.loads(so)
        except Exception:
            msg = se.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            out.write(f"{net}\t{dev}\tERROR rc={rc} {msg[0][:200]}\t\t\t\t{refs.get(net, '')}\t\t{rss:.0f}\n")
            out.flush(); continue
        t = j.get("timings", {})
        est = j.get("memory", {}).get("estimated_peak_bytes", 0) / 2**20
        sch = j.get("schedule") if isinstance(j.get("schedule"), dict) else {}
        note = (sch.get("policy") or "") + (" " + sch.get("note", "") if sch.get("note") else "")
        est_dev = (j.get("memory", {}).get("estimated_device_bytes") or 0) / 2**20
        dev_peak = (sch.get("device_peak_bytes") or 0) / 2**20
        slices = j.get("conditioning", {}).get("slices", 1)
        gpus = j.get("gpus", {}).get("used", "") if isinstance(j.get("gpus"), dict) else ""
        out.write(f"{net}\t{dev}\t{wall:.3f}\t{t.get('plan', 0):.3f}\t{t.get('compute', 0):.3f}\t"
                  f"{j.get('log10_pr')}\t{refs.get(net, '')}\t{est:.0f}\t{rss:.0f}\t"
                  f"{rss / est if est else 0:.2f}\t{j.get('device')}\t{est_dev:.0f}\t"
                  f"{dev_peak:.0f}\t{slices}\t{note[:150]}\t"
                  f"{t.get('read', 0):.3f}\t{j.get('order', {}).get('seconds', 0):.3f}\t"
                  f"{t.get('device_start', 0):.3f}\t{gpus}\n")
        out.flush()
