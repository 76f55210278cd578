#!/bin/bash
# Fourth session (kernel 5: the plain kernel's tiles of 2, on by default): GPU kernel test,
# --check with tiles, warm runs side by side (one cached order per network; tiles off / on
# alternating, three rounds), then the cold auto vs cpu table and pedigree50.
# Bundle: bench/e2e/bundle.sh build .dev-final10 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final10
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17 linkage_13
for i in 1 2 3; do
  KINFER_GPU_TILES=0 M --warm --out $R/warm-off-$i.tsv --devices auto --timeout 30 --deadline 60 \
    linkage_11 linkage_12 linkage_13 linkage_17
  M --warm --out $R/warm-on-$i.tsv --devices auto --timeout 30 --deadline 60 \
    linkage_11 linkage_12 linkage_13 linkage_17
done
for f in $R/warm-*.tsv; do echo "$(basename $f) $(cut -f1,3,5 $f | tail -n +2 | tr '\t\n' '  ')"; done
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
e2e_end 12
