#!/bin/bash
# Fifth session's closing check (kernel 6's merged small inputs, kernel 7's one-lane kernel):
# `kinfer calibrate` with the current kernels (45 s, linkage_11/17's buckets in the sweep: the
# shipped profile data/profiles/h100.json was fitted on 2026-11-23's kernels), then, with that
# profile as the shipped one: the GPU kernel test, --check, each bucket's predicted and measured
# kernel time (schedule-compare --bucket-log, for bench/scheduler/repredict against the old
# profile), the cold auto vs cpu table and pedigree50, and the auto rows with the helper exit.
# Bundle: bench/e2e/bundle.sh build .dev-final12 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final12
cp $B/data/profiles/h100.json $R/h100-old.json
timeout 150 $k calibrate --seconds 45 --network $D/linkage_11.uai --network $D/linkage_17.uai \
  -o $R/h100.json > $R/calibrate.txt 2> $R/calibrate.log
echo "calibrate rc=$? $(tail -3 $R/calibrate.txt | tr '\n' ' ')"
[ -s $R/h100.json ] && cp $R/h100.json $B/data/profiles/h100.json
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17 linkage_13
for n in linkage_11 linkage_17; do
  timeout 100 $k schedule-compare $D/$n.uai --seed 1 --order-time 1.5 --order-cache none --repeat 1 \
    --profile $B/data/profiles/h100.json --save-tree $R/$n.tree.json --bucket-log $R/$n.buckets.tsv \
    --json > $R/$n.json 2> $R/$n-schedule.log
  echo "schedule-compare $n rc=$?"
done
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
KINFER_EXIT=fast M --out "$R/helper.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_12 linkage_13 linkage_17
cut -f1-5 $R/helper.tsv
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
e2e_end 12
