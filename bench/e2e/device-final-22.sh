#!/bin/bash
# The session's last table: pedigree50 under 60G three times and the four large linkage networks
# (auto and cpu), cold, with kernel 9's tables from global memory.
# Bundle: bench/e2e/bundle.sh build .dev-final22 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final22
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50 pedigree50
cut -f1-10 $R/pedigree50.tsv
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 100 linkage_11 linkage_12 linkage_13 linkage_17
cut -f1-5 $R/after.tsv
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
