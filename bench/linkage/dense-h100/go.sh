#!/bin/bash
# issue 14 (dense): the Lander-Green chain on the GPU against the CPU, one run.
D=.dev-dense
K="$D/b/run apps/kinfer"
O=$OUT/r
mkdir -p $O
{ nvidia-smi --query-gpu=name,memory.total --format=csv; nproc; free -g; } > $O/machine.txt 2>&1
timeout 30 $D/b/run tests/test_gpu_chain > $O/test_gpu_chain.txt 2>&1; echo "rc $?" >> $O/test_gpu_chain.txt
run() {  # name timeout args...
  local name=$1 lim=$2; shift 2
  local t0=$(date +%s%N)
  timeout $((lim * ${SCALE:-100} / 100 + 1)) $K -v lod --json --max-memory ${MEM:-4G} --program linkmap --moving 1 "$@" > $O/$name.json 2> $O/$name.log
  local rc=$?
  echo "$name rc $rc wall $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> $O/times.txt
}
export OMP_NUM_THREADS=16
run c250-gpu 70 --ped $D/c250.ped --dat $D/c250.dat --positions -5:129.5:1 --device gpu
run c40-gpu 40 --ped $D/c40.ped --dat $D/c40.dat --positions -5:200:2 --device gpu
run c250-cpu16 40 --ped $D/c250.ped --dat $D/c250.dat --positions -5:129.5:1 --device cpu
python3 -c "
import json,sys
try:
  a=json.load(open('$O/c250-gpu.json'));b=json.load(open('$O/c250-cpu16.json'))
  la=[e['total']['ln_l'] for e in a['evaluations']];lb=[e['total']['ln_l'] for e in b['evaluations']]
  print('c250 gpu vs cpu: positions',len(la),len(lb),'max |d ln L|',max(abs(x-y) for x,y in zip(la,lb)))
except Exception as e: print('compare failed',e)
" >> $O/times.txt 2>&1
cat $O/times.txt
tar czf $OUT/dense.tgz -C $OUT r
