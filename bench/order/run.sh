#!/usr/bin/env bash
# Order search before/after on the shared UAI networks: `kinfer info NETWORK --json` (the order
# search without computing), two runs of each binary with --threads 2, one more of the new one
# with --threads 1 (the same order is expected), and the new search without annealing
# (order_bench --refine 0). Writes bench/order/results.tsv.
#   bench/order/run.sh NEW_KINFER OLD_KINFER ORDER_BENCH [OUT.tsv]
set -euo pipefail
new=$1 old=$2 ob=$3 out=${4:-bench/order/results.tsv}
S=/work/shared/data/uai D=$(dirname "$0")/../../data/uai
nets=(linkage_11 linkage_12 linkage_13 linkage_14 linkage_16 linkage_17 linkage_18 linkage_21
      linkage_24 pedigree50 Pedigree_11 Pedigree_12 Pedigree_13)
printf 'network\tversion\tthreads\trun\tlog2_total\tlog2_max_table\twidth\torder_s\twork\trestarts\tmoves\tstopped_by\theuristic\n' >"$out"
row() {  # network version threads run json
  python3 -c '
import json, sys
n, v, t, r, j = sys.argv[1:6]
o = json.loads(j)
o = o.get("order", o)
print("\t".join([n, v, t, r, "%.3f" % o["log2_total_state"], "%.3f" % o["log2_max_table"],
  str(o["width"]), "%.3f" % o["seconds"], "%.3f" % o.get("work", float("nan")),
  str(o["restarts"]), str(o.get("moves", 0)), o.get("stopped_by", "-"), o["heuristic"]]))' "$@"
}
for n in "${nets[@]}"; do
  f=$S/$n.uai; [ -f "$f" ] || f=$D/$n.uai
  for r in 1 2; do
    row "$n" before 2 "$r" "$("$old" info "$f" --json --threads 2 2>/dev/null)" >>"$out"
    row "$n" after 2 "$r" "$("$new" info "$f" --json --threads 2 2>/dev/null)" >>"$out"
  done
  row "$n" after 1 1 "$("$new" info "$f" --json --threads 1 2>/dev/null)" >>"$out"
  row "$n" "after-no-anneal" 2 1 "$("$ob" "$f" --threads 2 --budget 10 --refine 0)" >>"$out"
  tail -6 "$out"
done
