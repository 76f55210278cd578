#!/bin/bash
# issue 14 (dense, round 2), one device run: the GPU backend against the CPU backend (tables,
# per-state programs, point scores); the 250-SNP case (b); 30+ bits (c): a 33-bit pedigree with
# 50 SNPs (the network), a 30-bit one through the chain (6 markers to calibrate, then 50;
# emissions as tables up to 2^26 entries, larger ones per state on the fly).
D=.dev-dense
K="$D/b/run apps/kinfer"
O=$OUT/r
mkdir -p $O
{ nvidia-smi --query-gpu=name,memory.total --format=csv; nproc; free -g; } > $O/machine.txt 2>&1
timeout 60 $D/b/run tests/test_gpu_chain > $O/test_gpu_chain.txt 2>&1; echo "rc $?" >> $O/test_gpu_chain.txt
run() {  # name timeout args...
  local name=$1 lim=$2; shift 2
  local t0=$(date +%s%N)
  timeout $lim $K -v lod --json --max-memory ${MEM:-4G} --program linkmap --moving 1 "$@" > $O/$name.json 2> $O/$name.log
  local rc=$?
  echo "$name rc $rc wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> $O/times.txt
  return $rc
}
export OMP_NUM_THREADS=16
run c250-gpu 40 --ped $D/c250.ped --dat $D/c250.dat --positions -5:129.5:1 --device ${DEV:-gpu}
# 33 bits (27 people), 50 SNPs: beyond the chain's memory (2^33 doubles a vector): the network.
run b33-gpu 40 --ped $D/b33.ped --dat $D/b33.dat --positions -5:105:5 --bits 30 --device ${DEV:-gpu}
# 30 bits (24 people): the chain, first on 6 markers, then on 50.
MEM=64G run b30s-gpu ${B30S_LIMIT:-40} --ped $D/b30s.ped --dat $D/b30s.dat --positions 5 --bits 30 --device ${DEV:-gpu} &&
  MEM=64G run b30-gpu ${B30_LIMIT:-100} --ped $D/b30.ped --dat $D/b30.dat --positions -5:105:25 --bits 30 --device ${DEV:-gpu}
python3 - "$O" "$D" >> $O/times.txt 2>&1 <<'PY'
import json, sys
o, d = sys.argv[1], sys.argv[2]
try:
    a = json.load(open(f"{o}/c250-gpu.json")); b = json.load(open(f"{d}/c250-ref.json"))
    la = [e['total']['ln_l'] for e in a['evaluations']]; lb = [e['total']['ln_l'] for e in b['evaluations']]
    print('c250 gpu vs cpu (here) positions', len(la), len(lb), 'max |d ln L|', max(abs(x - y) for x, y in zip(la, lb)))
except Exception as e:
    print('compare failed', e)
PY
grep -h "chain on\|inheritance vector of\|evaluation(s) in\|error\|refused" $O/*.log >> $O/times.txt
cat $O/times.txt
tar czf $OUT/dense2.tgz -C $OUT r
