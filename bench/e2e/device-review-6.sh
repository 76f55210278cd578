#!/bin/bash
# Sixth session's review: after the last GPU-path commits (the timeline's derived times, the
# KINFER_GPU_LEAN_TWO parser): the GPU kernel test, --check, a timeline, pedigree50.
# Bundle: bench/e2e/bundle.sh build .dev-review6 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin review6
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt
e2e_check linkage_17; grep -o "check: passed.*relative" $R/check-linkage_17.txt | cut -c1-100
KINFER_GPU_TIMELINE=$R/l17.tsv timeout 60 $k pe $D/linkage_17.uai --json --order-cache none > $R/l17.json 2>/dev/null
python3 $B/timeline.py $R/l17.tsv --gap 1; grep -o '"log10_pr": [-0-9.e]*' $R/l17.json
KINFER_GPU_LEAN_TWO=abc timeout 60 $k pe $D/linkage_13.uai --json --order-cache none 2>/dev/null | grep -o '"log10_pr": [-0-9.e]*'
M --out "$R/p50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50; cut -f1-10 $R/p50.tsv
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
