#!/bin/bash
# Under a limit at an eighth of what conditioning can act on: for each network, the
# deterministic weighted-min-fill order's estimate (kinfer info) gives the fixed part (program,
# inputs, scratch) and the intermediate tables; the limit is fixed + intermediates/8 (the plain
# eighth of the estimate where that is larger). Then pe with and without the limit, each in its
# own process (bench/memory/measure.py: wait4 peak RSS, compute time).
# Usage: bench/memory/eighth.sh NETWORK...   (from the repository root, after ninja -C build)
set -euo pipefail
K=${KINFER:-build/apps/kinfer}
for net in "$@"; do
  lim=$($K info "$net" --json --order wminfill --threads 2 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
m = j["memory"]; est = m["estimated_peak_bytes"]; inter = m["parts"]["intermediates"]
print(int(max(est / 8, est - inter * 7 / 8) / 2**20) + 1)')
  echo "# $net: limit ${lim}M"
  python3 bench/memory/measure.py --extra "--order wminfill" "$net" | tail -n 1
  python3 bench/memory/measure.py --extra "--order wminfill --max-memory ${lim}M" "$net" | tail -n 1
done
