#!/bin/bash
# Where the time and the host memory of a --device auto run go (issue 11/12): the resource trail
# of -v runs (bench/e2e/trail.py) on the GPU machine. Bundle: bench/e2e/bundle.sh -> .dev-diag.
set -u
B=${B:-.dev-diag}; R=$OUT/trail; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles
k="$B/run apps/kinfer"; D=$B/data/uai
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $R/gpu.txt 2>&1
if [ "${GPU_TESTS:-1}" = 1 ]; then  # the context's table handling changed: the kernels' own tests
  ( cd "$B" && KINFER_DATA=$PWD/data KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > "$R/test_gpu_kernel.txt" 2>&1
  echo "exit $?" >> "$R/test_gpu_kernel.txt"
  ( cd "$B" && timeout 60 ./run tests/test_gpu_policy ) > "$R/test_gpu_policy.txt" 2>&1
  echo "exit $?" >> "$R/test_gpu_policy.txt"
fi
t="python3 $B/trail.py --kinfer \"$k\" --out $R"
eval $t "tiny-cpu=\"pe $D/Pedigree_11.uai --device cpu\"" "tiny-gpu=\"pe $D/Pedigree_11.uai --device gpu\""
for n in linkage_14 linkage_13 linkage_17 linkage_11; do
  eval $t "$n-auto-cold=\"pe $D/$n.uai --json --order-cache none\"" \
          "$n-auto-first=\"pe $D/$n.uai --json\"" "$n-auto-warm=\"pe $D/$n.uai --json\""
done
eval $t "linkage_17-gpu-only=\"pe $D/linkage_17.uai --json --order-cache none --device gpu --schedule gpu-only\"" \
        "linkage_17-cpu=\"pe $D/linkage_17.uai --json --order-cache none --device cpu\""
eval $t "linkage_17-check=\"pe $D/linkage_17.uai --json --check\""
eval $t --timeout 60 "pedigree50-auto=\"pe $D/pedigree50.uai --json --order-cache none --max-memory 60G\""
rm -rf $R/cache; tar -C $OUT -czf $OUT/trail.tgz trail && rm -rf $R
