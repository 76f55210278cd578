#!/bin/bash
# Issue 13 on a machine with 2 GPUs (nvidia-h200-x2): one process's conditioned plans with their
# slices over 1 GPU (CUDA_VISIBLE_DEVICES=0) and over 2 (0,1), side by side; same ln P(e).
# Usage (device): B=.dev-final bash bench/mpi/gpu_scale.sh   (results under $OUT/scale)
set -u
B=${B:-.dev-final}; R=$OUT/scale; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles
k="$B/run apps/kinfer"; D=$B/data/uai
nvidia-smi --query-gpu=index,name,memory.total --format=csv > $R/gpus.txt 2>&1
$k info $D/linkage_14.uai --json > $R/info.json 2>&1
run() {  # name visible args...
  local name=$1 vis=$2; shift 2
  local t0=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$vis timeout 150 $k pe "$@" --json > $R/$name.json 2> $R/$name.log
  local rc=$?
  python3 - $R/$name.json "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" >> $R/scale.txt <<'PY'
import json, sys
p, name, rc, ms = sys.argv[1:5]
try:
    j = json.load(open(p))
    g = j.get("gpus", {})
    t = j.get("timings", {})
    print(f"{name}: rc {rc} wall {int(ms)/1000:.2f} s plan {t.get('plan', 0):.3f} compute {t.get('compute', 0):.3f} "
          f"log10_pr {j.get('log10_pr')!r} slices {j.get('conditioning', {}).get('slices')} gpus {json.dumps(g)}")
except Exception as e:
    print(f"{name}: rc {rc} wall {int(ms)/1000:.2f} s ({e})")
PY
}
for rep in 1 2; do
  run l11-1gpu-$rep 0 $D/linkage_11.uai --device gpu --gpu-memory 256M --order-cache none
  run l11-2gpu-$rep 0,1 $D/linkage_11.uai --device gpu --gpu-memory 256M --order-cache none
done
run l14-1gpu 0 $D/linkage_14.uai --device gpu --gpu-memory 32M --order-cache none
run l14-2gpu 0,1 $D/linkage_14.uai --device gpu --gpu-memory 32M --order-cache none
run p50-1gpu 0 $D/pedigree50.uai --max-memory 60G --order-cache none
run p50-2gpu 0,1 $D/pedigree50.uai --max-memory 60G --order-cache none
run p50-1gpu-gm 0 $D/pedigree50.uai --max-memory 60G --gpu-memory 16G --order-cache none
run p50-2gpu-gm 0,1 $D/pedigree50.uai --max-memory 60G --gpu-memory 16G --order-cache none
cat $R/scale.txt
rm -rf $R/cache; tar -C $OUT -czf $OUT/scale.tgz scale && rm -rf $R
