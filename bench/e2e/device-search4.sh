#!/bin/bash
# Order search version 4 (restarts shared out among arms, lineages for the annealing, the
# weighted fill in integers) against version 3 (kinfer at e2cb1bb, the bundle's old/apps/kinfer),
# side by side, cold, interleaved: the large linkage networks auto and cpu, pedigree50 under
# 60G. First the GPU kernel test and pe --check (the review's mends of the seventh session had
# not run on a GPU). new-r16: the search sized with the GPU's rate at 1.6e11 states/s instead of
# 8e10 (KINFER_SEARCH_GPU_RATE).
# Bundle: bench/e2e/bundle.sh build .dev-search4 SHARED_UAI; cp OLD_BUILD/apps/kinfer .dev-search4/old/apps/
. "$(dirname "$0")/lib.sh"
e2e_begin search4
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17
kold="$B/run old/apps/kinfer"
MO() { python3 "$B/measure.py" --kinfer "$kold" --data "$D" "$@"; }
L="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18"
for i in 1 2; do
  M --out $R/new.tsv --devices auto,cpu --timeout 40 --deadline 100 $L
  MO --out $R/old.tsv --devices auto,cpu --timeout 40 --deadline 100 $L
  KINFER_SEARCH_GPU_RATE=1.6e11 M --out $R/new-r16.tsv --devices auto --timeout 40 --deadline 60 $L
  M --out $R/p50-new.tsv --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50
  MO --out $R/p50-old.tsv --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50
  KINFER_SEARCH_GPU_RATE=1.6e11 M --out $R/p50-r16.tsv --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50
done
for v in new old r16; do
  kk=$k; [ $v = old ] && kk=$kold
  [ $v = r16 ] && export KINFER_SEARCH_GPU_RATE=1.6e11
  for n in pedigree50 linkage_11 linkage_17; do
    timeout 60 $kk pe $D/$n.uai --json --order-cache none --max-memory 60G -v > $R/$n-$v.json 2> $R/$n-$v.log
    echo "$n $v rc=$? $(grep -o 'order [a-z ()-]*: width.*' $R/$n-$v.log | head -1) | $(grep -o 'search [0-9.]* s, [0-9.]* nominal[^)]*)' $R/$n-$v.log | head -1)"
  done
done
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
unset KINFER_SEARCH_GPU_RATE
for f in new old new-r16 p50-new p50-old p50-r16; do echo "== $f"; cut -f1-6,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
