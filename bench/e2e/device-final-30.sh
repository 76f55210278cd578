#!/bin/bash
# Eleventh session, closing table on the final build (reuse_order on top of the tenth session's
# final29 build): the kernel test and pe --check linkage_11/17 first; every shared network cold
# under `--device cpu` (16 cores) and right after it `--device auto` (`--max-memory 100G`, the
# issue's command; the ordinary exit); pedigree50 under 60G (three), 100G and the default
# limit; every network's auto run again at the end (back to back).
# Bundle: bench/e2e/bundle.sh build .dev-final30 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final30
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 linkage_24
Pedigree_11 Pedigree_12 Pedigree_13 pedigree1 Alchemy_11 CSP_12 DBN_11 Grids_11 ObjectDetection_74
Promedus_24 Segmentation_12 grid10x10.f10"
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 200 $NETS
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50 pedigree50
M --out "$R/p50-100G.tsv" --devices auto --timeout 60 --deadline 70 pedigree50
M --out "$R/p50-default.tsv" --devices auto --timeout 60 --deadline 70 --extra "" pedigree50
M --out "$R/again.tsv" --devices auto --timeout 40 --deadline 100 $NETS
echo "kinfer processes left: $(ps -eo comm | grep -cx kinfer || true)"
for f in after pedigree50 p50-100G p50-default again; do echo "== $f"; cut -f1-7,8,9,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
