#!/bin/bash
# The closing table with kernel 9 and its selector rule: auto vs 16-core cpu on the shared
# networks, cold (measure.py), pedigree50 under 60G three times.
# Bundle: bench/e2e/bundle.sh build .dev-final20 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final20
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
M --out "$R/pedigree50-more.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50
cut -f1-10 $R/pedigree50-more.tsv
e2e_end 12
