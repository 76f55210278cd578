#!/bin/bash
# Kernel 8 with four outputs per thread (a temporary build: KINFER_GPU_LEAN_TWO=4194304:4, launch
# bounds 2 blocks) against two (the default), measured and not kept (docs/perf-notes.md "Kernel 8"):
# the kernel test, --check forced, and pedigree50/linkage_11/17 from one cached order, three rounds.
# Bundle: bench/e2e/bundle.sh build .dev-leanfour SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin leanfour
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
KINFER_GPU_LEAN_TWO=1:4 timeout 60 $k pe $D/linkage_13.uai --check > $R/check-four-linkage_13.txt 2>&1; echo "check four linkage_13 exit $?: $(grep -o 'check: passed.*relative' $R/check-four-linkage_13.txt | head -1 | cut -c1-90)"
run() { e2e_pe_timeline "$@"; }  # (lib.sh)
for n in pedigree50 linkage_11 linkage_17; do
  run $n-warmup $n
  for i in 1 2 3; do run $n-two-$i $n; run $n-four-$i $n KINFER_GPU_LEAN_TWO=4194304:4; done
done
rm -f $R/*.log; rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
