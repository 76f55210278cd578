#!/bin/bash
# Tenth session, closing table (kernel 9 compiled for 2-8 terms): cold `pe --device auto` right
# after each network's 16-core `--device cpu` run, the ordinary exit; pedigree50 under 60G
# (three), 100G (the issue's command) and the default limit; the four large ones again at the
# end (back to back); then the auto rows with the helper exit (KINFER_EXIT=fast: what the default
# gives where process 1 reaps orphans, systemd or a container's init) and the processes left.
# Bundle: bench/e2e/bundle.sh build .dev-final27 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final27
NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11"
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 120 $NETS
e2e_p50_rows
M --out "$R/after.tsv" --devices auto --timeout 40 --deadline 60 linkage_17 linkage_13 linkage_12 linkage_11
sleep 5
e2e_helper_rows linkage_11 linkage_12 linkage_13 linkage_17
for f in after pedigree50 p50-100G p50-default helper; do echo "== $f"; cut -f1-10,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
