#!/usr/bin/env bash
# The README's test command: install missing dependencies, configure (once), build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export PATH="/usr/local/cuda/bin:$PATH"
[ -f build/build.ninja ] || meson setup build --buildtype=release
ninja -C build
meson test -C build --print-errorlogs --num-processes 2 "$@"
