#!/bin/bash
# Fifth session: the shipped H200 profile recalibrated with kernels 6-7 (as h100.json in
# device-final-12.sh), then checked: each bucket's predicted and measured kernel time on
# linkage_11 (schedule-compare --bucket-log, for bench/scheduler/repredict against the old
# profile) and `pe --device auto` on linkage_11/17 with the new profile as the shipped one.
# Bundle: bench/e2e/bundle.sh build .dev-h200 SHARED_UAI   (machine kind nvidia-h200)
. "$(dirname "$0")/lib.sh"
e2e_begin h200cal
cp $B/data/profiles/h200.json $R/h200-old.json
timeout 150 $k calibrate --seconds 45 --network $D/linkage_11.uai --network $D/linkage_17.uai \
  -o $R/h200.json > $R/calibrate.txt 2> $R/calibrate.log
echo "calibrate rc=$? $(tail -8 $R/calibrate.txt | tr '\n' ' ')"
[ -s $R/h200.json ] && cp $R/h200.json $B/data/profiles/h200.json
for n in linkage_11 linkage_17; do
  timeout 100 $k schedule-compare $D/$n.uai --seed 1 --order-time 1.5 --order-cache none --repeat 1 \
    --profile $B/data/profiles/h200.json --save-tree $R/$n.tree.json --bucket-log $R/$n.buckets.tsv \
    --json > $R/$n.json 2> $R/$n-schedule.log
  echo "schedule-compare $n rc=$?"
done
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 80 linkage_11 linkage_17 linkage_13 Pedigree_11
cut -f1-12 $R/after.tsv
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
