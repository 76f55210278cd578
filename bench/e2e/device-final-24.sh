#!/bin/bash
# Ninth session, calls 2-4: the CPU-sized search's new rate (2e8 states per nominal core-second)
# and --order-time 40. (1) A/B of the auto path, interleaved, two rounds: this build as it is
# against KINFER_SEARCH_CPU_RATE=5e7 --order-time 10 (the eighth session's sizing); cold
# (--order-cache none). (2) The closing table as device-final-23: cold `pe --device auto` right
# after each network's 16-core `--device cpu` run, the ordinary exit; pedigree50 under 60G
# (three), 100G (the issue's command) and the default limit; the four large ones again at the end.
# The same script ran three builds: call 2 (FINAL_NAME=final24, the default), call 3
# (FINAL_NAME=final25: the background start's test back on the old rate, after call 2's linkage_14
# auto 0.38 -> 0.52 s, its device started after the plan) and call 4 (FINAL_NAME=final26: the
# sizing's GPU test back on the guessed core rate too, after call 3's linkage_14 went CPU-sized,
# its search 0.19 -> 0.34 s).
# Bundle: bench/e2e/bundle.sh build .dev-$FINAL_NAME SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin ${FINAL_NAME:-final24}
NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11"
for round in 1 2; do
  M --out "$R/ab-new.tsv" --devices auto --timeout 40 --deadline 80 $NETS
  KINFER_SEARCH_CPU_RATE=5e7 M --out "$R/ab-old.tsv" --devices auto --timeout 40 --deadline 80 --extra "--max-memory 100G --order-time 10" $NETS
  M --out "$R/ab-new-p50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
  KINFER_SEARCH_CPU_RATE=5e7 M --out "$R/ab-old-p50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G --order-time 10" pedigree50
done
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 120 $NETS
e2e_p50_rows
M --out "$R/after.tsv" --devices auto --timeout 40 --deadline 60 linkage_17 linkage_13 linkage_12 linkage_11
e2e_left
for f in ab-new ab-old ab-new-p50 ab-old-p50 after pedigree50 p50-100G p50-default; do echo "== $f"; cut -f1-10,17 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
