#!/bin/bash
# Issue 12, end to end, after the two-level outer table, the GPU started at the search's first
# round and the auto decision kept: the GPU tests (the kernel's also with KINFER_GPU_MID_ROWS=4,
# both levels walked on every bucket), --check on the networks with the one-output buckets,
# the resource trail (-v) and the auto vs cpu table (cold). Bundle: bench/e2e/bundle.sh -> .dev-e2e.
set -u
B=${B:-.dev-e2e}; R=$OUT/e2e2; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
k="$B/run apps/kinfer"; D=$B/data/uai
( cd "$B" && KINFER_GPU_TEST_SCALE=0.03 timeout 150 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel.txt
( cd "$B" && KINFER_GPU_MID_ROWS=4 KINFER_GPU_TEST_SCALE=0.03 timeout 150 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel-mid4.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel-mid4.txt
( cd "$B" && timeout 60 ./run tests/test_gpu_policy ) > $R/test_gpu_policy.txt 2>&1; echo "exit $?" >> $R/test_gpu_policy.txt
for n in linkage_12 linkage_13 linkage_17; do
  timeout 60 $k pe $D/$n.uai --check --json > $R/check-$n.json 2> $R/check.log; echo "exit $?" >> $R/check.log
  grep -v "check: bucket" $R/check.log > $R/check-$n.log; rm $R/check.log
done
t="python3 $B/trail.py --kinfer \"$k\" --out $R/trail"
eval $t "tiny-auto=\"pe $D/Pedigree_11.uai\"" "linkage_16-auto=\"pe $D/linkage_16.uai --order-cache none\"" "linkage_21-auto=\"pe $D/linkage_21.uai --order-cache none\""
for n in linkage_17 linkage_13 linkage_11 linkage_12 linkage_14 linkage_18; do
  eval $t "$n-auto-cold1=\"pe $D/$n.uai --json --order-cache none\"" "$n-auto-cold2=\"pe $D/$n.uai --json --order-cache none\"" \
          "$n-auto-first=\"pe $D/$n.uai --json\"" "$n-auto-warm=\"pe $D/$n.uai --json\""
done
python3 "$B/measure.py" --kinfer "$k" --data "$D" --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 150 \
  linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11
rm -rf $R/cache; tar -C $OUT -czf $OUT/e2e2.tgz e2e2 && rm -rf $R
