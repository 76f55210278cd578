#!/bin/bash
# The GPU machine's memory table (issue 11), one call: every shared network with --device cpu
# and --device auto (RSS vs estimate, device peak vs device estimate), a tiny network with
# --device gpu (the CUDA context's host memory), and pedigree50 with --device auto --max-memory
# 60G, once more with --gpu-memory 8G (conditioned for the device).
# Usage (from a bundle made by ../shared/tools/bundle-for-device, holding this script,
# bench/e2e/measure.py as measure.py and the UAI networks under data/uai):
#   bash BUNDLE/gpu-run.sh BUNDLE OUTDIR
set -uo pipefail
B=${1:?bundle}; O=${2:?out}
mkdir -p "$O"
K="$B/run apps/kinfer"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$O/gpu.txt" 2>&1
nproc >> "$O/gpu.txt"
python3 "$B/measure.py" --kinfer "$K" --data "$B/data/uai" --out "$O/sweep.tsv" \
  --devices cpu,auto --timeout 30 --deadline 80 --extra "--max-memory 100G" \
  Pedigree_11 Pedigree_12 Pedigree_13 pedigree1 Promedus_24 grid10x10.f10 CSP_12 Grids_11 \
  Segmentation_12 Alchemy_11 ObjectDetection_74 DBN_11 linkage_16 linkage_21 linkage_24 \
  linkage_14 linkage_18 linkage_12 linkage_13 linkage_17 linkage_11 2> "$O/sweep.err"
python3 "$B/measure.py" --kinfer "$K" --data "$B/data/uai" --out "$O/context.tsv" \
  --devices gpu,cpu --timeout 15 --deadline 20 --extra "--max-memory 100G" \
  Pedigree_11 linkage_16 2> "$O/context.err"
if [ -e "$B/data/uai/pedigree50.uai" ]; then
  python3 "$B/measure.py" --kinfer "$K" --data "$B/data/uai" --out "$O/pedigree50.tsv" \
    --devices auto --timeout 30 --deadline 32 --extra "--max-memory 60G" pedigree50 2> "$O/p50.err"
  python3 "$B/measure.py" --kinfer "$K" --data "$B/data/uai" --out "$O/pedigree50.tsv" \
    --devices auto --timeout 40 --deadline 52 --extra "--max-memory 60G --gpu-memory 8G" \
    pedigree50 2>> "$O/p50.err"
fi
tail -c 20000 "$O"/*.err > "$O/errors.txt" 2>/dev/null; rm -f "$O"/*.err
