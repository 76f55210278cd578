#!/bin/bash
# Tenth session, closing table on the final build (kernel 9 compiled for 2-8 terms, one work
# queue, the accountant's context part by queues): cold `pe --device auto` right
# after each network's 16-core `--device cpu` run, the ordinary exit; pedigree50 under 60G
# (three), 100G (the issue's command) and the default limit; the four large ones again at the
# end (back to back); the kernel test and pe --check linkage_11/17 first.
# Bundle: bench/e2e/bundle.sh build .dev-final29 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final29
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11"
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 120 $NETS
e2e_p50_rows
M --out "$R/after.tsv" --devices auto --timeout 40 --deadline 60 linkage_17 linkage_13 linkage_12 linkage_11
e2e_left
for f in after pedigree50 p50-100G p50-default; do echo "== $f"; cut -f1-10,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
