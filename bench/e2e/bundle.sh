#!/bin/bash
# Assembles the device bundle for bench/e2e's device scripts: the release build (made with
# -Dcuda=enabled), the shared UAI networks with REFERENCES.tsv, data/profiles and the scripts.
# usage: bench/e2e/bundle.sh BUILD_DIR BUNDLE_DIR SHARED_UAI_DIR
set -euo pipefail
build=$1 out=$2 uai=$3
here=$(cd "$(dirname "$0")" && pwd)
# the shared tool beside the checkout (../shared/tools), as the device README describes
tool=${BUNDLE_TOOL:-/work/shared/tools/bundle-for-device}
"$tool" "$build" "$out"
mkdir -p "$out/data/uai" "$out/data/profiles"
cp "$uai"/*.uai "$uai"/*.evid "$uai"/REFERENCES.tsv "$out/data/uai/" 2>/dev/null || true
cp "$here"/../../data/profiles/*.json "$out/data/profiles/"
cp "$here"/*.sh "$here"/measure.py "$out/"
du -sh "$out"
