#!/bin/bash
# Twelfth session: CUDA's lazy kernel loading waits for the kernels in flight, so plans
# prepared beside the run load their kernels behind the GPU's work. Three arms, all with the
# page offsets filled on the device: the plans built beside the run (default), built before it
# (KINFER_GPU_PREPARE=ahead: every kernel loaded before the first launch), and beside with
# CUDA_MODULE_LOADING=EAGER (every kernel loaded with the context). pe timelines (three rounds;
# the executor's line and the device's opening of each), then cold `pe --device auto` of each arm
# in turn (three rounds) and pedigree50 (60G, two).
# Bundle: bench/e2e/bundle.sh build .dev-loads SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin loads
NETS="linkage_11 linkage_17 linkage_13 linkage_12"
for i in 0 1 2; do
  for n in $NETS pedigree50; do
    e2e_pe_timeline $n-beside-$i $n
    e2e_pe_timeline $n-ahead-$i $n KINFER_GPU_PREPARE=ahead
    e2e_pe_timeline $n-eager-$i $n CUDA_MODULE_LOADING=EAGER
  done
done > $R/timelines.txt
for f in $R/*.log; do
  echo "$(basename $f .log): $(grep -o 'executor: [0-9.]* s; kernel plans prepared in [0-9.]* s[^;]*' $f | head -1 | cut -c1-120) | $(grep -o 'GPU 0 opened in [0-9.]* s' $f | head -1)"
done | sort
for i in 1 2 3; do
  M --out "$R/beside.tsv" --devices auto --timeout 40 --deadline 60 $NETS > /dev/null 2>&1
  KINFER_GPU_PREPARE=ahead M --out "$R/ahead.tsv" --devices auto --timeout 40 --deadline 60 $NETS > /dev/null 2>&1
  CUDA_MODULE_LOADING=EAGER M --out "$R/eager.tsv" --devices auto --timeout 40 --deadline 60 $NETS > /dev/null 2>&1
done
for i in 1 2; do
  M --out "$R/p50-beside.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  KINFER_GPU_PREPARE=ahead M --out "$R/p50-ahead.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  CUDA_MODULE_LOADING=EAGER M --out "$R/p50-eager.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
for f in beside ahead eager p50-beside p50-ahead p50-eager; do echo "== $f"; cut -f1,3-5,9 $R/$f.tsv | tail -n +2; done
e2e_left
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
