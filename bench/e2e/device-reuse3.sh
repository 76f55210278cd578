#!/bin/bash
# Eleventh session: reuse_order's thresholds around the defaults (KINFER_GPU_REUSE_ORDER=
# BYTES[:NEAR[:OVER]]; default 32e6:1024:1.5), GPU busy time from pe timelines (60G) of
# pedigree50 and the linkage networks, two rounds, the orders cached after the first run.
# Bundle: bench/e2e/bundle.sh build .dev-reuse3 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin reuse3
for i in 0 1; do
  for n in pedigree50 linkage_11 linkage_12 linkage_13 linkage_17 linkage_18; do
    for c in default:32e6:1024:1.5 off:0 near64:32e6:64:1.5 near16k:32e6:16384:1.5 over1:32e6:1024:1 over3:32e6:1024:3 min8m:8e6:1024:1.5; do
      e2e_pe_timeline $n-${c%%:*}-$i $n KINFER_GPU_REUSE_ORDER=${c#*:} > /dev/null
    done
  done
done
python3 - "$R" <<'PY'
import csv, glob, os, sys, collections
R = sys.argv[1]
busy = collections.defaultdict(list)
for f in glob.glob(os.path.join(R, "*.tsv")):
    name = os.path.basename(f)[:-4]
    net, cfg, rnd = name.rsplit("-", 2)
    t = 0.0
    for r in csv.DictReader(open(f), delimiter="\t"):
        t += float(r["gpu_end"]) - float(r["gpu_begin"])
    busy[(net, cfg)].append(1e3 * t)
cfgs = ["default", "off", "near64", "near16k", "over1", "over3", "min8m"]
print("network " + " ".join(f"{c:>14}" for c in cfgs))
for net in ["pedigree50", "linkage_11", "linkage_12", "linkage_13", "linkage_17", "linkage_18"]:
    print(net, " ".join(f"{'/'.join(f'{x:.1f}' for x in sorted(busy[(net, c)])):>14}" for c in cfgs))
PY
for f in $R/*.json; do grep -q '"log10_pr"' $f || echo "no answer: $f"; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
