#!/bin/bash
# Kernel generation 9 tried (kernel 9, the seventh session's one-lane kernel; the build had
# gpu::kKernelGeneration = 9, since put back to 8): `kinfer calibrate` for
# the shipped profile of this machine's GPU (PROFILE: h100 or h200), the GPU kernel test, then
# cold `pe --device auto` with the new profile and with the old one (generation 8), interleaved,
# and each one's prediction against the measured compute.
# Bundle: bench/e2e/bundle.sh build .dev-cal9 SHARED_UAI; run as device-calibrate-9.sh PROFILE
. "$(dirname "$0")/lib.sh"
p=${1:-h100}
e2e_begin cal9-$p
e2e_calibrate $p
mkdir -p $R/oldprof && cp $R/$p-old.json $R/oldprof/$p.json
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
L="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18"
for i in 1 2; do
  M --out $R/new.tsv --devices auto --timeout 40 --deadline 60 $L
  KINFER_PROFILES=$R/oldprof M --out $R/old.tsv --devices auto --timeout 40 --deadline 60 $L
  M --out $R/p50-new.tsv --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
  KINFER_PROFILES=$R/oldprof M --out $R/p50-old.tsv --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
done
M --out $R/cpu.tsv --devices cpu --timeout 40 --deadline 100 linkage_13 linkage_17 linkage_14 linkage_18
for v in new old; do
  for n in linkage_11 linkage_17 linkage_14 linkage_18 pedigree50; do
    if [ $v = old ]; then export KINFER_PROFILES=$R/oldprof; else export KINFER_PROFILES=$PWD/$B/data/profiles; fi
    timeout 60 $k pe $D/$n.uai --json --order-cache none --max-memory 60G -v > $R/$n-$v.json 2> $R/$n-$v.log
    echo "$n $v rc=$? $(grep -o 'predicted [^,]*, [^(]*(' $R/$n-$v.log | head -1) $(grep -o 'schedule [a-z-]*: [0-9]* buckets on the GPU, [0-9]* on the CPU' $R/$n-$v.log | head -1) $(python3 -c "import json; d=json.load(open('$R/$n-$v.json')); print('compute', round(d['timings']['compute'], 3), 'schedule predicted', d['schedule']['predicted_seconds'], d['schedule']['policy'])" 2>/dev/null)"
  done
done
export KINFER_PROFILES=$PWD/$B/data/profiles
for f in new old p50-new p50-old cpu; do echo "== $f"; cut -f1-6,11,15 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
