#!/bin/bash
# after the direct table upload: GPU tests, --check, auto estimate vs RSS, pedigree50
B=.dev-final; R=$OUT/final7; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
( cd "$B" && KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel.txt
( cd "$B" && timeout 60 ./run tests/test_gpu_chain ) > $R/test_gpu_chain.txt 2>&1; echo "exit $?" >> $R/test_gpu_chain.txt
k="$B/run apps/kinfer"
timeout 60 $k pe $B/data/uai/linkage_17.uai --check --json > $R/check-linkage_17.json 2> $R/check.log; echo "exit $?" >> $R/check.log
grep -v "check: bucket" $R/check.log > $R/check-linkage_17.log; rm $R/check.log
python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" --out "$R/after.tsv" --devices auto \
  --timeout 30 --deadline 90 linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17
python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" --out "$R/pedigree50.tsv" --devices auto \
  --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
rm -rf $R/cache; tar -C $OUT -czf $OUT/final7.tgz final7 && rm -rf $R
