#!/usr/bin/env python3
"""What-if on a recorded cost tree (schedule-compare --save-tree): every transfer (uploads and
moves of outputs) made K times slower, as on a slower host-device link, then each policy's
predicted cost from `kinfer schedule --tree --json`. Predictions only.
usage: slow-link.py KINFER TREE.json K..."""
import json
import subprocess
import sys
import tempfile

kinfer, tree, factors = sys.argv[1], sys.argv[2], [float(k) for k in sys.argv[3:]]
print("| link slower by | cpu-only | greedy (GPU nodes) | comm-aware (GPU nodes) | comm-aware vs greedy |")
print("|---|---|---|---|---|")
for k in factors:
    t = json.load(open(tree))
    for n in t["nodes"]:
        for key in ("upload", "to_gpu", "to_cpu"):
            n[key] *= k
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(t, f)
        f.flush()
        j = json.loads(subprocess.run([kinfer, "schedule", "--tree", f.name, "--json"], check=True,
                                      capture_output=True, text=True).stdout)["policies"]
    def c(p):
        return j[p]["cost"] * 1e3
    def g(p):
        return sum(d == "gpu" for d in j[p]["assignment"].values())
    print(f"| {k:g}x | {c('cpu-only'):.2f} ms | {c('greedy'):.2f} ms ({g('greedy')}) | "
          f"{c('comm-aware'):.2f} ms ({g('comm-aware')}) | {100 * (c('comm-aware') / c('greedy') - 1):+.1f}% |")
