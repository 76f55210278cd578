#!/bin/bash
# The session's last check of main (kernel 9 formatted, its test case): the kernel test, --check,
# and pedigree50 as the issue's user ran it (`--max-memory 100G`) and with the default limit.
# Bundle: bench/e2e/bundle.sh build .dev-final21 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final21
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep -E 'kernel 9:' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
for n in linkage_11 linkage_17; do grep -o "check: [a-z]*.*relative" $R/check-$n.txt | cut -c1-100; done
M --out "$R/p50-100G.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 100G" pedigree50 pedigree50; cut -f1-10 $R/p50-100G.tsv
M --out "$R/p50-default.tsv" --devices auto --timeout 60 --deadline 70 --extra "" pedigree50; cut -f1-10 $R/p50-default.tsv | tail -1
timeout 60 $k pe $D/pedigree50.uai --max-memory 100G -v > $R/p50-100G-v.txt 2>&1; grep -E 'condition|slices|opened' $R/p50-100G-v.txt | head -5
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
