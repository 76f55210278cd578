#!/bin/bash
# (2026-11-23 late: device-final.sh plus warm-cache runs.) The session's closing check on the GPU machine, on merged main: the GPU tests, --check on the
# large networks (unconditioned and conditioned for the device with --gpu-memory), the after
# table (bench/e2e/measure.py, auto and cpu side by side, cold order cache) and pedigree50.
# Bundle in B (bench/e2e/bundle.sh BUILD B /work/shared/data/uai); everything under $OUT.
set -u
B=${B:-.dev-final}
OUT=${OUT:-/tmp/out}
R=$OUT/final6
mkdir -p "$R"
k="$B/run apps/kinfer"
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
( cd "$B" && KINFER_GPU_TEST_SCALE=0.03 timeout 150 ./run tests/test_gpu_kernel ) > "$R/test_gpu_kernel.txt" 2>&1
echo "exit $?" >> "$R/test_gpu_kernel.txt"
( cd "$B" && timeout 60 ./run tests/test_gpu_policy ) > "$R/test_gpu_policy.txt" 2>&1
echo "exit $?" >> "$R/test_gpu_policy.txt"
if [ -x "$B/tests/test_gpu_chain" ]; then
  ( cd "$B" && timeout 60 ./run tests/test_gpu_chain ) > "$R/test_gpu_chain.txt" 2>&1
  echo "exit $?" >> "$R/test_gpu_chain.txt"
fi
for n in linkage_12 linkage_17; do
  timeout 60 $k pe "$B/data/uai/$n.uai" --check --json > "$R/check-$n.json" 2> "$R/check-$n.log"
  echo "exit $?" >> "$R/check-$n.log"
done
timeout 90 $k pe "$B/data/uai/linkage_14.uai" --device gpu --gpu-memory 32M --json \
  > "$R/gpumem-linkage_14.json" 2> "$R/gpumem-linkage_14.log"
echo "exit $?" >> "$R/gpumem-linkage_14.log"
# the runner's conditioned-plan path from lod (network path: --bits 0) and info's GPU list
F=data/merlin/fastlink/fastlink
for d in cpu gpu; do
  timeout 90 $k lod -d $F.dat -p $F.ped -m $F.map -f $F.freq --model $F.model --grid 5 \
    --start 0 --stop 25 --bits 0 --device $d --max-memory 24M --json \
    > "$R/lod-$d.json" 2> "$R/lod-$d.log"
  echo "exit $?" >> "$R/lod-$d.log"
done
timeout 60 $k info "$B/data/uai/linkage_14.uai" --json > "$R/info-linkage_14.json" 2>&1
M() { python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" "$@"; }
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 170 \
  Pedigree_11 Pedigree_13 pedigree1 linkage_14 linkage_16 linkage_18 linkage_21 linkage_24 \
  linkage_11 linkage_12 linkage_13 linkage_17 CSP_12 DBN_11 Grids_11
# warm: the default order cache (the first pass fills it, the second reuses it)
M --warm --out "$R/fill-cache.tsv" --devices auto --timeout 40 --deadline 60 \
  linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18
M --warm --out "$R/after-warm.tsv" --devices auto --timeout 40 --deadline 60 \
  linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" \
  pedigree50
rm -rf "$R/cache"
tar -C "$OUT" -czf "$OUT/final6.tgz" final6 && rm -rf "$R"
