#!/bin/bash
# Twelfth session: the kernel plans built beside the run (scheduler/executor.cpp, Preparation:
# the GPU thread starts at once and builds or waits for a bucket's plan when it reaches it;
# KINFER_GPU_PREPARE=ahead: all built before the run, as before). The kernel test, pe --check
# linkage_11/17, pe timelines both ways (three rounds; the executor's line of each), two rounds
# with CUDA_MODULE_LOADING=EAGER, then cold `pe --device auto` both ways alternating (three
# rounds) and pedigree50 (60G) both ways.
# Bundle: bench/e2e/bundle.sh build .dev-beside SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin beside
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
e2e_timelines_ab 3 beside ahead KINFER_GPU_PREPARE=ahead linkage_11 linkage_17 linkage_13 linkage_12 pedigree50
for i in 0 1; do for n in linkage_11 linkage_17; do e2e_pe_timeline $n-eager-$i $n CUDA_MODULE_LOADING=EAGER; done; done
for f in $R/*.log; do
  echo "$(basename $f .log): $(grep -o 'executor: [0-9.]* s; kernel plans prepared in [0-9.]* s[^;]*' $f | head -1 | cut -c1-120) | $(grep -c 'for its kernel plan' $f) plan waits"
done
for i in 1 2 3; do
  M --out "$R/beside.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_13 linkage_12 > /dev/null 2>&1
  KINFER_GPU_PREPARE=ahead M --out "$R/ahead.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_13 linkage_12 > /dev/null 2>&1
done
for i in 1 2; do
  M --out "$R/p50-beside.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  KINFER_GPU_PREPARE=ahead M --out "$R/p50-ahead.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
for f in beside ahead p50-beside p50-ahead; do echo "== $f"; cut -f1-6,9 $R/$f.tsv; done
e2e_left
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
