#!/bin/bash
# Fifth session: the shipped H200 profile recalibrated with kernels 6-7 (as h100.json in
# device-final-12.sh), then checked: each bucket's predicted and measured kernel time on
# linkage_11 (schedule-compare --bucket-log, for bench/scheduler/repredict against the old
# profile) and `pe --device auto` on linkage_11/17 with the new profile as the shipped one.
# Bundle: bench/e2e/bundle.sh build .dev-h200cal SHARED_UAI   (machine kind nvidia-h200)
# (its steps moved into lib.sh functions after the run, unchanged)
. "$(dirname "$0")/lib.sh"
e2e_begin h200cal
e2e_calibrate h200
e2e_bucket_logs h200 linkage_11 linkage_17
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 80 linkage_11 linkage_17 linkage_13 Pedigree_11
cut -f1-12 $R/after.tsv
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
