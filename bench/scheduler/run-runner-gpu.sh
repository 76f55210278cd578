#!/bin/bash
# Issue 10's verification on the GPU machine, in one call: the GPU tests, then `kinfer pe` on the
# shared linkage networks through the one runner/executor under each placement policy, with
# --check, and `kinfer lod --check` on a data/linkage example. Run from a bundle folder that
# holds this script, data/ (uai networks + REFERENCES.tsv, profiles, linkage) and the build:
#   ./run-runner-gpu.sh OUT
set -u
out=${1:?usage: run-runner-gpu.sh OUT}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export KINFER_DATA=$here/data KINFER_EXE=$here/apps/kinfer KINFER_GPU_SKIP_LARGE=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
# 1. tests: the GPU kernel test (every policy through the runner + check on 16 networks) and the
#    CLI check verdicts (with a GPU: passed, exit 0)
timeout 170 ./run tests/test_gpu_kernel "~[large]" > "$out/test_gpu_kernel.log" 2>&1
echo -e "test_gpu_kernel\t$?" > "$out/tests.tsv"
timeout 60 ./run tests/test_io "Check.PeAndLodGiveAVerdict" > "$out/test_io_check.log" 2>&1
echo -e "test_io Check.PeAndLodGiveAVerdict\t$?" >> "$out/tests.tsv"
# 2. pe on the linkage networks: one elimination order per network (cached), every policy
#    (greedy/comm-aware predict from the shipped H200 profile; "default" has no profile: the
#    whole-plan fallback), then --check
printf "network\tpolicy\trc\tlog10_pr\treference\tpolicy_ran\tbuckets_gpu\tbuckets_cpu\tfirst_run_s\trepeat_median_s\tcheck_passed\tcheck_max_rel\n" > "$out/pe.tsv"
for n in linkage_11 linkage_12 linkage_13 linkage_17; do
  net=data/uai/$n.uai
  ref=$(awk -v n="$n" '$1==n{print $2}' data/uai/REFERENCES.tsv)
  for p in default whole-plan comm-aware greedy gpu-only cpu-only check; do
    args=(pe "$net" --json --device gpu --order-cache "$out/orders" --repeat 3)
    case $p in
      default) ;;
      check) args+=(--check) ;;
      greedy|comm-aware) args+=(--schedule "$p" --profile data/profiles/h200.json) ;;
      *) args+=(--schedule "$p") ;;
    esac
    timeout 120 ./run apps/kinfer "${args[@]}" > "$out/pe-$n-$p.json" 2> "$out/pe-$n-$p.log"
    rc=$?
    python3 - "$out/pe-$n-$p.json" "$n" "$p" "$rc" "$ref" >> "$out/pe.tsv" <<'PY'
import json, sys
path, n, p, rc, ref = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception:
    print(f"{n}\t{p}\t{rc}\t-\t{ref}\t-\t-\t-\t-\t-\t-\t-"); sys.exit()
s, c = j.get("schedule", {}), j.get("check", {})
print("\t".join(str(x) for x in [n, p, rc, j.get("log10_pr"), ref, s.get("policy"),
      s.get("buckets_gpu"), s.get("buckets_cpu"), s.get("first_run_seconds"),
      s.get("repeat_median_seconds"), c.get("passed", "-"), c.get("max_rel_diff", "-")]))
PY
  done
done
# 3. lod --check on a data/linkage example (every plan checked)
ex=data/linkage/fastlink_example
ls $ex > "$out/lod-example-files.txt" 2>&1
ped=$ex/pedfile.dat dat=$ex/datafile.dat
timeout 120 ./run apps/kinfer lod --ped "$ped" --dat "$dat" --device gpu --check --json \
  > "$out/lod-check.json" 2> "$out/lod-check.log"
echo -e "lod --check $ped\t$?" >> "$out/tests.tsv"
