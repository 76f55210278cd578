#!/bin/bash
# The parts of device-final-8.sh that ran on a stale gpu/chain.cu object (meson 1.0 tracks no
# header of a .cu: bench/e2e/bundle.sh now refuses such a build): the GPU chain's test and the
# dense-map runs; and the small networks auto vs cpu three times each (final8's single runs
# differed by up to 0.04 s both ways).
set -u
B=${B:-.dev-final}; R=$OUT/final8b; mkdir -p "$R"
k="$B/run apps/kinfer"
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
( cd "$B" && timeout 60 ./run tests/test_gpu_chain ) > "$R/test_gpu_chain.txt" 2>&1; echo "exit $?" >> "$R/test_gpu_chain.txt"
L() {  # name device args...
  local name=$1 dev=$2; shift 2
  local t0=$(date +%s%N)
  timeout 90 $k -v lod --json --max-memory 8G --program linkmap --moving 1 --device $dev "$@" \
    > "$R/$name.json" 2> "$R/$name.log"
  echo "$name rc $? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> "$R/dense-times.txt"
}
L c250-gpu gpu --ped $B/dense/c250.ped --dat $B/dense/c250.dat --positions -5:129.5:1
L c250-cpu16 cpu --ped $B/dense/c250.ped --dat $B/dense/c250.dat --positions -5:129.5:1
L c40-gpu gpu --ped $B/dense/c40.ped --dat $B/dense/c40.dat --positions -5:200:2
L c40-cpu16 cpu --ped $B/dense/c40.ped --dat $B/dense/c40.dat --positions -5:200:2
python3 - "$R" "$B/dense" >> "$R/dense-times.txt" 2>&1 <<'PY'
import json, sys
r, d = sys.argv[1], sys.argv[2]
for run, ref in [("c250-gpu", "c250-here"), ("c250-cpu16", "c250-here"), ("c40-gpu", "c40-here"), ("c40-cpu16", "c40-here")]:
    try:
        a = json.load(open(f"{r}/{run}.json")); b = json.load(open(f"{d}/{ref}.json"))
        la = [e["total"]["ln_l"] for e in a["evaluations"]]; lb = [e["total"]["ln_l"] for e in b["evaluations"]]
        print(run, "positions", len(la), len(lb), "max |d ln L|", max(abs(x - y) for x, y in zip(la, lb)))
    except Exception as e:
        print(run, "compare failed", e)
PY
grep -h "chain on\|evaluation(s) in" "$R"/c*.log >> "$R/dense-times.txt"
rm -f "$R"/c250-*.json "$R"/c40-*.json
for i in 1 2 3; do
  python3 "$B/measure.py" --kinfer "$k" --data "$B/data/uai" --out "$R/small-$i.tsv" --devices auto,cpu \
    --timeout 40 --deadline 60 Pedigree_11 Pedigree_13 pedigree1 linkage_16 linkage_21 linkage_24 CSP_12 DBN_11 Grids_11
done
rm -rf "$R/cache"; tar -C "$OUT" -czf "$OUT/final8b.tgz" final8b && rm -rf "$R"
