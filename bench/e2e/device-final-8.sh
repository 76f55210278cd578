#!/bin/bash
# (2026-11-24: device-final-6.sh plus the kernel test with the two-level outer table walked on
# every bucket, --check linkage_13, and the dense-map chain: c250/c40 on the GPU and on the 16
# cores, ln L against this machine's.) The session's closing check on the GPU machine, on merged
# main: the GPU tests, --check on the large networks (unconditioned and conditioned for the
# device with --gpu-memory), the after table (bench/e2e/measure.py, auto and cpu side by side,
# cold order cache), warm runs and pedigree50.
# Bundle in B (bench/e2e/bundle.sh BUILD B /work/shared/data/uai); everything under $OUT.
set -u
B=${B:-.dev-final}
OUT=${OUT:-/tmp/out}
R=$OUT/final8
mkdir -p "$R"
k="$B/run apps/kinfer"
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
( cd "$B" && KINFER_GPU_TEST_SCALE=0.03 timeout 150 ./run tests/test_gpu_kernel ) > "$R/test_gpu_kernel.txt" 2>&1
echo "exit $?" >> "$R/test_gpu_kernel.txt"
( cd "$B" && KINFER_GPU_MID_ROWS=4 KINFER_GPU_TEST_SCALE=0.03 timeout 150 ./run tests/test_gpu_kernel ) > "$R/test_gpu_kernel-mid4.txt" 2>&1
echo "exit $?" >> "$R/test_gpu_kernel-mid4.txt"
( cd "$B" && timeout 60 ./run tests/test_gpu_policy ) > "$R/test_gpu_policy.txt" 2>&1
echo "exit $?" >> "$R/test_gpu_policy.txt"
if [ -x "$B/tests/test_gpu_chain" ]; then
  ( cd "$B" && timeout 60 ./run tests/test_gpu_chain ) > "$R/test_gpu_chain.txt" 2>&1
  echo "exit $?" >> "$R/test_gpu_chain.txt"
fi
for n in linkage_12 linkage_13 linkage_17; do
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
# dense maps (issue 14): the chain on the GPU and on the 16 cores; ln L against this machine's
L() {  # name device args...
  local name=$1 dev=$2; shift 2
  local t0=$(date +%s%N)
  timeout 90 $k -v lod --json --max-memory 8G --program linkmap --moving 1 --device $dev "$@" \
    > "$R/$name.json" 2> "$R/$name.log"
  echo "$name rc $? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> "$R/dense-times.txt"
}
L c250-gpu gpu --ped $B/dense/c250.ped --dat $B/dense/c250.dat --positions -5:129.5:1
L c250-cpu16 cpu --ped $B/dense/c250.ped --dat $B/dense/c250.dat --positions -5:129.5:1
L c40-gpu gpu --ped $B/dense/c40.ped --dat $B/dense/c40.dat --positions -5:200:2
python3 - "$R" "$B/dense" >> "$R/dense-times.txt" 2>&1 <<'PY'
import json, sys
r, d = sys.argv[1], sys.argv[2]
for run, ref in [("c250-gpu", "c250-here"), ("c250-cpu16", "c250-here"), ("c40-gpu", "c40-here")]:
    try:
        a = json.load(open(f"{r}/{run}.json")); b = json.load(open(f"{d}/{ref}.json"))
        la = [e["total"]["ln_l"] for e in a["evaluations"]]; lb = [e["total"]["ln_l"] for e in b["evaluations"]]
        print(run, "positions", len(la), len(lb), "max |d ln L|", max(abs(x - y) for x, y in zip(la, lb)))
    except Exception as e:
        print(run, "compare failed", e)
PY
grep -h "chain on\|evaluation(s) in" "$R"/c*.log >> "$R/dense-times.txt"
rm -f "$R"/c250-*.json "$R"/c40-*.json
rm -rf "$R/cache"
tar -C "$OUT" -czf "$OUT/final8.tgz" final8 && rm -rf "$R"
