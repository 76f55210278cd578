#!/bin/bash
# Kernel 8 (two outputs per thread in large one-lane launches, KINFER_GPU_LEAN_TWO=items, 0 off):
# the kernel test with it on every one-lane plan (=1) and by default, --check with it forced,
# pedigree50's slices (timeline) and the warm linkage_11/13/17 compute with it and without.
# Bundle: bench/e2e/bundle.sh build .dev-leantwo SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin leantwo
( cd $B && KINFER_GPU_LEAN_TWO=1 KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel-forced.txt 2>&1; echo "forced exit $?" | tee -a $R/test_gpu_kernel-forced.txt; tail -2 $R/test_gpu_kernel-forced.txt
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
for n in linkage_11 linkage_17; do
  KINFER_GPU_LEAN_TWO=1 timeout 60 $k pe $D/$n.uai --check > $R/check-forced-$n.txt 2>&1; echo "check forced $n exit $?: $(grep -o 'check: [a-z]*.*relative' $R/check-forced-$n.txt | head -1)"
done
KINFER_GPU_LEAN_TWO=1 timeout 120 $k pe $D/pedigree50.uai --check --max-memory 60G > $R/check-forced-p50.txt 2>&1; echo "check forced pedigree50 exit $?: $(grep -o 'check: [a-z]*.*relative' $R/check-forced-p50.txt | head -1)"
run() { e2e_pe_timeline "$@"; }  # (lib.sh)
for n in pedigree50 linkage_11 linkage_17 linkage_13 linkage_12; do
  run $n-warmup $n
  for i in 1 2 3; do run $n-two-$i $n; run $n-one-$i $n KINFER_GPU_LEAN_TWO=0; done
done
sed -i '/kernel plan of [0-9]\{1,8\} /d; /factor inputs multiplied/d' $R/*.log
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
