#!/bin/bash
# The eighth session's closing table on main (search version 4, GPU rate 1.6e11 in the binary):
# cold `pe --device auto` right after each network's 16-core `--device cpu` run, the ordinary
# exit; pedigree50 three times under 60G, once under 100G (the issue's command) and once with the
# default limit.
# Bundle: bench/e2e/bundle.sh build .dev-final23 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final23
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 120 linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
e2e_p50_rows
M --out "$R/after.tsv" --devices auto --timeout 40 --deadline 60 linkage_17 linkage_13 linkage_12 linkage_11
e2e_left
for f in after pedigree50 p50-100G p50-default; do echo "== $f"; cut -f1-10,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
