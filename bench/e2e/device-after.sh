#!/bin/bash
# Device call 2 of the plan-time work: the after table (bench/e2e/measure.py, auto and cpu side
# by side, cold: no order cache), pedigree50, the GPU teardown at exit on and off, the order
# cache warm, and the automatic calibration of a GPU no profile knows. Bundle in B=.dev-plan
# (bench/e2e/bundle.sh); everything under $OUT, tarred.
set -u
B=${B:-.dev-plan}
OUT=${OUT:-/tmp/out}
R=$OUT/c2
mkdir -p "$R"
k="$B/run apps/kinfer"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
export XDG_CACHE_HOME=$R/cache  # no user profile: the shipped one is found by the GPU's name
M() { python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" "$@"; }
M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 200 \
  Pedigree_11 Pedigree_12 Pedigree_13 pedigree1 linkage_14 linkage_16 linkage_18 linkage_21 \
  linkage_24 linkage_11 linkage_12 linkage_13 linkage_17 CSP_12 DBN_11 Grids_11 grid10x10.f10 \
  Promedus_24 Segmentation_12 Alchemy_11 ObjectDetection_74
M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" \
  pedigree50
# the GPU context torn down at exit (as before this change) against leaving without it
# (KINFER_GPU_TEARDOWN: a switch of that build only; pe tears it down again since)
KINFER_GPU_TEARDOWN=1 M --out "$R/teardown.tsv" --devices auto --timeout 20 --deadline 40 \
  linkage_12 linkage_14 linkage_18
# the default order cache: a first run fills it, the next reuse the order
M --out "$R/warm.tsv" --devices auto,auto,cpu --warm --timeout 20 --deadline 60 \
  linkage_12 linkage_17
# a GPU no profile knows (the executable away from data/profiles): calibrated once, then reused
mkdir -p "$R/bare/bin" "$R/bare/cache"
cp "$B/apps/kinfer" "$R/bare/bin/"
LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" XDG_CACHE_HOME=$R/bare/cache \
  python3 "$B/measure.py" --kinfer "$R/bare/bin/kinfer" --data "$B/data/uai" --out "$R/auto-calibration.tsv" \
  --devices auto,auto --timeout 60 --deadline 90 linkage_12
rm -f "$R/bare/bin/kinfer"
ls -R "$R/bare/cache" > "$R/auto-calibration-cache.txt" 2>&1
rm -rf "$R/cache"
tar -C "$OUT" -czf "$OUT/c2.tgz" c2 && rm -rf "$R"
