#!/bin/bash
# Issue 12, the closing check of this session's code (main after device-e2e-6: rounds of 32
# restarts + 12 chains of 8 moves, the search at 6 core-s per second with a floor of 2 device
# starts, the profile read beside the background start, the placement kept from the auto
# decision, the later rounds' start with 2x fewer states, no extension past the target). Trail
# (-v) of cold --device auto runs, the auto vs cpu table, pedigree50, --check, GPU kernel test.
# Bundle: bench/e2e/bundle.sh build .dev-e2e7 ../shared/data/uai
set -u
B=${B:-.dev-e2e7}; R=$OUT/e2e7; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
k="$B/run apps/kinfer"; D=$B/data/uai
nproc > $R/machine.txt; nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv >> $R/machine.txt
t="python3 $B/trail.py --kinfer \"$k\" --out $R/trail"
for n in linkage_11 linkage_17 linkage_13 linkage_12 linkage_14 linkage_18 linkage_21; do
  eval $t "$n-cold1=\"pe $D/$n.uai --json --order-cache none\"" "$n-cold2=\"pe $D/$n.uai --json --order-cache none\"" \
          "$n-cold3=\"pe $D/$n.uai --json --order-cache none\""
done
for n in linkage_11 linkage_17; do  # warm: the first run fills the order cache
  eval $t "$n-fill=\"pe $D/$n.uai --json\"" "$n-warm1=\"pe $D/$n.uai --json\"" "$n-warm2=\"pe $D/$n.uai --json\""
done
M() { python3 "$B/measure.py" --kinfer "$k" --data "$D" "$@"; }
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 150 \
  linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11 Pedigree_13 pedigree1
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
( cd $B && KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel.txt 2>&1; echo "exit $?" >> $R/test_gpu_kernel.txt
for n in linkage_17 linkage_12 linkage_11; do timeout 60 $k pe $D/$n.uai --check > $R/check-$n.txt 2>&1; echo "exit $?" >> $R/check-$n.txt; done
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
cut -f1-5 $R/after.tsv; cut -f1-5 $R/pedigree50.tsv | tail -1
rm -rf $R/cache; tar -C $OUT -czf $OUT/e2e7.tgz e2e7 && rm -rf $R
