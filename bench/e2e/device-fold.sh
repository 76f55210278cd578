#!/bin/bash
# Twelfth session: merge rule 3 (gpu/merge_inputs.hpp): a factor input whose scope lies inside a
# child's output is added into that child's table on the device (Context::fold) instead of being
# a kernel input. KINFER_GPU_FOLD=0: off, as before. The kernel test and pe --check
# linkage_11/12/13/17 first (the check folds too); pe timelines both ways (three rounds: GPU
# busy); cold `pe --device auto` both ways alternating (three rounds) and pedigree50 (60G).
# Bundle: bench/e2e/bundle.sh build .dev-fold SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin fold
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_12 linkage_13 linkage_17
NETS="linkage_17 linkage_13 linkage_11 linkage_12 linkage_18 linkage_14"
e2e_timelines_ab 3 fold nofold KINFER_GPU_FOLD=0 $NETS pedigree50
for n in $NETS pedigree50; do
  for c in fold nofold; do
    echo "$n $c: $(for i in 0 1 2; do python3 $B/timeline.py $R/$n-$c-$i.tsv --gap 5 2>/dev/null | head -1 | grep -o 'GPU busy [0-9.]* ms'; done | tr '\n' ' ') $(grep -o '"log10_pr": [-0-9.e]*' $R/$n-$c-0.json)"
  done
done
for i in 1 2 3; do
  M --out "$R/fold.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_13 linkage_12 > /dev/null 2>&1
  KINFER_GPU_FOLD=0 M --out "$R/nofold.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_13 linkage_12 > /dev/null 2>&1
done
M --out "$R/p50-fold.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50 > /dev/null 2>&1
for f in fold nofold p50-fold; do echo "== $f"; cut -f1,3-7,9 $R/$f.tsv | tail -n +2; done
e2e_left
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
