#!/bin/bash
# Ran on branch exp/linear-domain (88a9d7b), not main: the experiment was measured and not merged.
# Issue 12 experiment (branch exp/linear-domain): the scaled linear-domain plain kernel
# (KINFER_GPU_LINEAR=1). Correctness first: test_gpu_kernel with every plain bucket taking it
# where the ranges allow (KINFER_GPU_LINEAR_MIN=0), pe --check on linkage_11/13/17 (buckets of
# >= 2^26 states, the default threshold, and MIN=0); then speed: the default orders of
# linkage_11/17 bucket by bucket with and without, and cold pe runs alternating.
# Bundle: bench/e2e/bundle.sh build .dev-linear SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin linear
( cd $B && KINFER_GPU_LINEAR=1 KINFER_GPU_LINEAR_MIN=0 KINFER_GPU_TEST_SCALE=0.03 timeout 150 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel-lin0.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel-lin0.txt
tail -3 $R/test_gpu_kernel-lin0.txt
for n in linkage_11 linkage_17 linkage_13; do
  KINFER_GPU_LINEAR=1 timeout 60 $k pe $D/$n.uai --check > $R/check-lin-$n.txt 2>&1; echo "exit $?" >> $R/check-lin-$n.txt
  KINFER_GPU_LINEAR=1 KINFER_GPU_LINEAR_MIN=0 timeout 60 $k pe $D/$n.uai --check > $R/check-lin0-$n.txt 2>&1; echo "exit $?" >> $R/check-lin0-$n.txt
  grep -h "check:" $R/check-lin-$n.txt $R/check-lin0-$n.txt
done
for spec in linkage_11:1.54 linkage_17:0.95; do
  n=${spec%:*} b=${spec#*:}
  for mode in log lin; do
    env $( [ $mode = lin ] && echo KINFER_GPU_LINEAR=1 ) timeout 200 $k schedule-compare $D/$n.uai --seed 1 --order-time $b \
      --order-cache none --repeat 1 --profile $B/data/profiles/h100.json --bucket-log $R/$n-$mode-buckets.tsv > $R/$n-$mode-schedule.log 2>&1
  done
  python3 - $R/$n-log-buckets.tsv $R/$n-lin-buckets.tsv <<'PY'
import csv, sys
a = {r["bucket"]: r for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")}
b = {r["bucket"]: r for r in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
ta = sum(float(r["gpu_measured"]) for r in a.values()); tb = sum(float(r["gpu_measured"]) for r in b.values())
print(sys.argv[1].split("/")[-1], "GPU summed: log %.4f s, linear %.4f s (%.2fx)" % (ta, tb, ta / tb))
for k in sorted(a, key=lambda k: -float(a[k]["gpu_measured"]))[:8]:
    r = a[k]; print("  bucket %s 2^%s states M 2^%s in %s: log %.2f ms, linear %.2f ms" % (k, r["log2_states"], r["log2_marg"], r["inputs"], 1e3 * float(r["gpu_measured"]), 1e3 * float(b[k]["gpu_measured"])))
PY
done
python3 - "$B/run apps/kinfer" "$D" > $R/pe.tsv <<'PY'
import json, os, subprocess, sys, time
kinfer, D = sys.argv[1].split(), sys.argv[2]
print("mode\tnetwork\trun\twall_s\tplan_s\tcompute_s\tlog10_pr")
for net in ["linkage_11", "linkage_17", "linkage_12", "linkage_13"]:
    for i in range(2):
        for mode in ["log", "lin"]:
            env = dict(os.environ, KINFER_EXIT="wait")
            if mode == "lin": env["KINFER_GPU_LINEAR"] = "1"
            time.sleep(0.3)
            t0 = time.time()
            o = subprocess.run(kinfer + ["pe", f"{D}/{net}.uai", "--json", "--order-cache", "none"], capture_output=True, text=True, env=env)
            w = time.time() - t0
            try:
                j = json.loads(o.stdout); t = j["timings"]
                print(f"{mode}\t{net}\t{i}\t{w:.4f}\t{t['plan']:.4f}\t{t['compute']:.4f}\t{j['log10_pr']:.8f}", flush=True)
            except Exception:
                print(f"{mode}\t{net}\t{i}\t{w:.4f}\trc={o.returncode}", flush=True)
PY
cat $R/pe.tsv
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
