#!/bin/bash
# Eleventh session on nvidia-h200: this session's build (kernel 9's compiled terms, one work
# queue, reuse_order, huge-page plan tables, kept pinned buffers) on the other shipped profile's
# device: the kernel test, pe --check linkage_11/17, the six GPU-planned linkage networks cold
# under cpu then auto (--max-memory 100G), pedigree50 under 60G twice and the default limit.
# Bundle: bench/e2e/bundle.sh build .dev-h200f SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin h200f
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 120 linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50
M --out "$R/p50-default.tsv" --devices auto --timeout 60 --deadline 70 --extra "" pedigree50
e2e_left
for f in after pedigree50 p50-default; do echo "== $f"; cut -f1-7,8,9,15 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
