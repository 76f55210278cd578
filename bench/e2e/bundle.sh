#!/bin/bash
# Assembles the device bundle for bench/e2e's device scripts: the release build (made with
# -Dcuda=enabled), the shared UAI networks with REFERENCES.tsv, data/profiles and the scripts.
# usage: bench/e2e/bundle.sh BUILD_DIR BUNDLE_DIR SHARED_UAI_DIR
set -euo pipefail
build=$1 out=$2 uai=$3
here=$(cd "$(dirname "$0")" && pwd)
# Meson 1.0 (Debian 12) writes no dependency files for CUDA objects: a .cu compiled before a
# header it includes changed is not rebuilt by ninja (a stale gpu/chain.cu.o crashed the GPU
# chain on 2026-11-24). Refuse such a build; `touch gpu/*.cu && ninja` mends it.
src=$(cd "$here/../.." && pwd)
for o in "$build"/gpu/*.p/*.cu.o; do
  [ -e "$o" ] || continue
  newer=$(find "$src/gpu" "$src/engine" "$src/linkage" -name '*.hpp' -o -name '*.cuh' | xargs ls -t | head -1)
  if [ "$newer" -nt "$o" ]; then
    echo "bundle.sh: $o is older than $newer (CUDA objects do not track headers): touch gpu/*.cu and rebuild" >&2
    exit 1
  fi
done
# the shared tool beside the checkout (../shared/tools), as the device README describes
tool=${BUNDLE_TOOL:-/work/shared/tools/bundle-for-device}
"$tool" "$build" "$out"
mkdir -p "$out/data/uai" "$out/data/profiles"
cp "$uai"/*.uai "$uai"/*.evid "$uai"/REFERENCES.tsv "$out/data/uai/" 2>/dev/null || true
cp "$here"/../../data/profiles/*.json "$out/data/profiles/"
cp "$here"/*.sh "$here"/*.py "$out/"
du -sh "$out"
