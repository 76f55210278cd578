#!/usr/bin/env bash
# The GPU paths against the CPU on a GPU machine, after a change that CI (no GPU) cannot check:
#   scripts/gpu-checks.sh BUNDLE OUT [SCALE]
# BUNDLE is scripts/device-bundle.sh's folder (its `run` wrapper, apps/kinfer, tests/); OUT gets
# one log per check and summary.tsv (check, exit code, seconds). SCALE (default 0.3) scales the
# number of random buckets of the kernel test (KINFER_GPU_TEST_SCALE). Exit 0 when every check
# passed.
#   1. tests/test_gpu_kernel: random and real buckets, every planner variant, against the CPU
#   2. tests/test_gpu_chain: the Lander-Green chain's steps against the CPU
#   3. pe --check on linkage_11 and linkage_17 (every bucket on both devices, compared)
#   4. a batch through a device worker (its GPU kept open across jobs) against --device cpu
#   5. mar and mpe with their upward pass on the GPU: --check, and the answers against --device cpu
set -uo pipefail
bundle=${1:?usage: scripts/gpu-checks.sh BUNDLE OUT [SCALE]}
out=${2:?usage: scripts/gpu-checks.sh BUNDLE OUT [SCALE]}
scale=${3:-0.3}
here=$(cd "$(dirname "$0")/.." && pwd)
run="$bundle/run"
mkdir -p "$out"
export KINFER_DATA="$here/data" KINFER_ORDER_CACHE=none KINFER_GPU_TEST_SCALE="$scale"
printf 'check\texit\tseconds\n' > "$out/summary.tsv"
failed=0
check() {  # NAME COMMAND...: runs it, logs it, records its exit code and seconds
  local name=$1
  shift
  local t0=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >> "$out/summary.tsv"
  [ "$rc" -eq 0 ] || failed=1
}
net() { ls "$here"/data/uai/large/"$1".uai* "$here"/data/uai/"$1".uai* 2>/dev/null | grep -v evid | head -1; }

[ -x "$bundle/tests/test_gpu_kernel" ] && check gpu-kernel "$run" tests/test_gpu_kernel
[ -x "$bundle/tests/test_gpu_chain" ] && check gpu-chain "$run" tests/test_gpu_chain
for name in linkage_11 linkage_17; do
  check "pe-check-$name" "$run" apps/kinfer pe "$(net $name)" --device gpu --check --json
done

# mar and mpe: the upward pass on the GPU (max-product for mpe) checked bucket by bucket, and the
# answers (marginals, the assignment's probability) against --device cpu; on the small networks
# also the assignment itself, on one order (--order minfill: the GPU's order search picks another
# order, whose traceback may pick another assignment of the same probability; minfill's order is
# far too large for linkage_13).
for name in linkage_13 Pedigree_13 DBN_11; do
  check "mpe-check-$name" "$run" apps/kinfer mpe "$(net $name)" --device gpu --check --json -q
  check "mar-check-$name" "$run" apps/kinfer mar "$(net $name)" --device gpu --check --json -q
  same_order=1
  [ "$name" = linkage_13 ] && same_order=0
  check "posterior-vs-cpu-$name" python3 - "$run" "$(net $name)" "$same_order" <<'PY'
import json, subprocess, sys
run, net, same_order = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def ask(cmd, device):
    order = ["--order", "minfill"] if same_order else []
    r = subprocess.run([run, "apps/kinfer", cmd, net, "--device", device, "--json", "-q"] + order,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)
m_cpu, m_gpu = ask("mar", "cpu"), ask("mar", "gpu")
e_cpu, e_gpu = ask("mpe", "cpu"), ask("mpe", "gpu")
worst = max(abs(a - b) for pa, pb in zip(m_cpu["marginals"], m_gpu["marginals"]) for a, b in zip(pa, pb))
print("mar: device", m_gpu["device"], "largest marginal difference", worst,
      "log10 P(e)", m_cpu["log10_pr"], m_gpu["log10_pr"])
print("mpe: device", e_gpu["device"], "log10 P(x, e)", e_cpu["log10_pr"], e_gpu["log10_pr"],
      "same assignment", e_cpu["assignment"] == e_gpu["assignment"])
ok = (worst <= 1e-9 and "gpu" in m_gpu["device"] and "gpu" in e_gpu["device"]
      and abs(m_cpu["log10_pr"] - m_gpu["log10_pr"]) <= 1e-9 * max(1, abs(m_cpu["log10_pr"]))
      and abs(e_cpu["log10_pr"] - e_gpu["log10_pr"]) <= 1e-9 * max(1, abs(e_cpu["log10_pr"]))
      and (e_cpu["assignment"] == e_gpu["assignment"] or not same_order))
sys.exit(0 if ok else 1)
PY
done

# A batch on one GPU: pe jobs of two networks (the device worker keeps its GPU open across them)
# and one lod job, each answer against the same command with --device cpu.
work=$(mktemp -d)
lod_ped="$here/data/linkage/mixed_bits/chain19.ped"
lod_dat="$here/data/linkage/mixed_bits/chain19.dat"
{
  printf 'id\tkind\tnetwork\tevidence\tped\tdat\toptions\n'
  for k in 0 1 2; do
    printf 'l11-%s\tpe\t%s\t\t\t\t\n' "$k" "$(net linkage_11)"
    printf 'l13-%s\tpe\t%s\t\t\t\t\n' "$k" "$(net linkage_13)"
  done
  printf 'lod\tlod\t\t\t%s\t%s\t--device gpu\n' "$lod_ped" "$lod_dat"
} > "$work/jobs.tsv"
check batch env CUDA_VISIBLE_DEVICES=0 "$run" apps/kinfer batch "$work/jobs.tsv" --out "$work/out" --json
python3 - "$run" "$work" "$(net linkage_11)" "$(net linkage_13)" "$lod_ped" "$lod_dat" \
  > "$out/batch-vs-cpu.log" 2>&1 <<'PY'
import json, subprocess, sys
run, work, l11, l13, ped, dat = sys.argv[1:]
def cpu(args):
    return json.loads(subprocess.run([run, "apps/kinfer"] + args + ["--device", "cpu", "--json", "-q"],
                                     capture_output=True, text=True, check=True).stdout)
ref = {"l11": cpu(["pe", l11])["log10_pr"], "l13": cpu(["pe", l13])["log10_pr"]}
lod = [e["total"]["ln_l"] for e in cpu(["lod", "--ped", ped, "--dat", dat])["evaluations"]]
worst, where = 0.0, set()
for i in ["l11-0", "l11-1", "l11-2", "l13-0", "l13-1", "l13-2"]:
    j = json.load(open(f"{work}/out/results/{i}.json"))
    worst = max(worst, abs(j["log10_pr"] - ref[i.split("-")[0]]))
j = json.load(open(f"{work}/out/results/lod.json"))
for a, b in zip([e["total"]["ln_l"] for e in j["evaluations"]], lod):
    worst = max(worst, abs(a - b) / max(1.0, abs(b)))
print("largest difference from the CPU:", worst)
for line in open(f"{work}/out/summary.tsv"):
    print(line.rstrip())
sys.exit(0 if worst < 1e-9 else 1)
PY
rc=$?
printf 'batch-vs-cpu\t%s\t0\n' "$rc" >> "$out/summary.tsv"
[ "$rc" -eq 0 ] || failed=1
rm -rf "$work"
cat "$out/summary.tsv"
exit "$failed"
