#!/bin/bash
# after the review's one-list-of-device-tables change: GPU tests, --check, answers
B=.dev-final; R=$OUT/review; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
( cd $B && KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel.txt
( cd $B && KINFER_GPU_MID_ROWS=4 KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel-mid4.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel-mid4.txt
( cd $B && timeout 60 ./run tests/test_gpu_chain ) > $R/test_gpu_chain.txt 2>&1; echo "exit $?" >> $R/test_gpu_chain.txt
for n in linkage_13 linkage_17; do timeout 60 $B/run apps/kinfer pe $B/data/uai/$n.uai --check > $R/check-$n.txt 2>&1; echo "exit $?" >> $R/check-$n.txt; done
python3 $B/measure.py --kinfer "$B/run apps/kinfer" --data $B/data/uai --out $R/after.tsv --devices auto --timeout 30 --deadline 60 linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
cut -f1-6 $R/after.tsv
rm -rf $R/cache
