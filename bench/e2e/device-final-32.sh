#!/bin/bash
# Eleventh session, closing table on the final build (reuse_order, the huge-page plan tables and the kept pinned buffers):
# device-final-30.sh's steps (every shared network cold under `--device cpu`, 16 cores, then
# `--device auto`, `--max-memory 100G`; pedigree50 under 60G x3, 100G, the default; every auto
# run again at the end), with the kernel test and pe --check linkage_11/12/17 first.
# Bundle: bench/e2e/bundle.sh build .dev-final32 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final32
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'REUSE' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_12 linkage_17
NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 linkage_24
Pedigree_11 Pedigree_12 Pedigree_13 pedigree1 Alchemy_11 CSP_12 DBN_11 Grids_11 ObjectDetection_74
Promedus_24 Segmentation_12 grid10x10.f10"
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 200 $NETS
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50 pedigree50
M --out "$R/p50-100G.tsv" --devices auto --timeout 60 --deadline 70 pedigree50
M --out "$R/p50-default.tsv" --devices auto --timeout 60 --deadline 70 --extra "" pedigree50
M --out "$R/again.tsv" --devices auto --timeout 40 --deadline 100 $NETS
echo "kinfer processes left: $(ps -eo comm | grep -cx kinfer || true)"
for f in after pedigree50 p50-100G p50-default again; do echo "== $f"; cut -f1-5,8,9,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
