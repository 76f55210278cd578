#!/bin/bash
# Tenth session: the kernels' launch plans built beside the run (the GPU thread starts at once)
# against before it (KINFER_GPU_PREPARE=before, as until now): the kernel test (networks end to
# end on the GPU included), pe --check linkage_11/17/13, cold `pe --device auto` A/B after 3 s
# idle (three rounds), pedigree50 (60G) two rounds, timelines of linkage_11 both ways, and the
# table's auto rows (RSS against the estimate, whose CUDA context part now follows the queues).
# Bundle: bench/e2e/bundle.sh build .dev-prepare SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin prepare
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17 linkage_13
for i in 1 2 3; do
  for c in beside before; do
    for n in linkage_11 linkage_17 linkage_13 linkage_12; do
      sleep 3
      if [ $c = beside ]; then M --out "$R/ab-beside.tsv" --devices auto --timeout 40 --deadline 60 $n > /dev/null 2>&1
      else KINFER_GPU_PREPARE=before M --out "$R/ab-before.tsv" --devices auto --timeout 40 --deadline 60 $n > /dev/null 2>&1; fi
    done
  done
done
for i in 1 2; do
  sleep 3; M --out "$R/ab-beside-p50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  sleep 3; KINFER_GPU_PREPARE=before M --out "$R/ab-before-p50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
e2e_pe_timeline linkage_11-beside linkage_11
e2e_pe_timeline linkage_11-before linkage_11 KINFER_GPU_PREPARE=before
e2e_pe_timeline linkage_17-beside linkage_17
e2e_pe_timeline linkage_17-before linkage_17 KINFER_GPU_PREPARE=before
M --out "$R/after.tsv" --devices auto --timeout 40 --deadline 90 linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 > /dev/null 2>&1
for f in ab-beside ab-before ab-beside-p50 ab-before-p50 after; do echo "== $f"; cut -f1-6,8,9,10 $R/$f.tsv; done
grep -h "executor:" $R/linkage_1*-*.log | cut -c1-120
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
