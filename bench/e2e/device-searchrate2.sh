#!/bin/bash
# The GPU-sized search's rate (KINFER_SEARCH_GPU_RATE, states per second of the GPU in the
# prediction that stops the search at a quarter of the compute): 8e10 (the constant), 1.6e11 and
# 3.2e11, interleaved, cold `pe --device auto`, with search version 4; then the cpu rows once.
# Bundle: bench/e2e/bundle.sh build .dev-rate SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin searchrate2
L="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18"
for i in 1 2; do
  for r in 8e10 1.6e11 3.2e11; do
    KINFER_SEARCH_GPU_RATE=$r M --out $R/auto-$r.tsv --devices auto --timeout 40 --deadline 60 $L
    KINFER_SEARCH_GPU_RATE=$r M --out $R/p50-$r.tsv --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
  done
done
M --out $R/cpu.tsv --devices cpu --timeout 40 --deadline 100 $L
for r in 8e10 1.6e11 3.2e11; do
  for n in pedigree50 linkage_11 linkage_12 linkage_17; do
    KINFER_SEARCH_GPU_RATE=$r timeout 60 $k pe $D/$n.uai --json --order-cache none --max-memory 60G -v > $R/$n-$r.json 2> $R/$n-$r.log
    echo "$n $r rc=$? $(grep -o 'order [a-z ()-]*: width.*' $R/$n-$r.log | head -1 | cut -c1-110) | $(grep -o 'search [0-9.]* s, [0-9.]* nominal[^,]*' $R/$n-$r.log | head -1)"
  done
done
for f in auto-8e10 auto-1.6e11 auto-3.2e11 p50-8e10 p50-1.6e11 p50-3.2e11 cpu; do echo "== $f"; cut -f1-5,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
