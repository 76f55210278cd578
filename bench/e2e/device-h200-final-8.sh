#!/bin/bash
# The eighth session on the H200 (kind nvidia-h200): kernel 9 had never run there. The GPU kernel
# test, pe --check, and cold `pe --device auto` against `--device cpu` with search version 4 and
# the shipped H200 profile; pedigree50 under 60G twice.
# Bundle: bench/e2e/bundle.sh build .dev-h200v4 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin h200v4
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 120 linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50
e2e_left
for f in $R/check-*.txt; do echo "$f: $(grep -o 'check: [a-zA-Z]* ([^;]*' $f | tail -1)"; done
for f in after pedigree50; do echo "== $f"; cut -f1-10,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
