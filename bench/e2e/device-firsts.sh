#!/bin/bash
# Thirteenth session: what a cold GPU run does between the device's opening and its first
# kernel, step by step. A bare CUDA program's first uses after its context (cuda_exit firsts:
# memory info, streams, the first cudaMalloc, pinned blocks, pageable and pinned uploads, a
# kernel's first launch), three times after 3 s idle; then cold `pe --device auto -v` of
# linkage_17/11/12 after 3 s idle, twice each, with the new debug lines (the free memory read,
# the prediction's time, the staging's pinned block and device tables).
# Bundle: bench/e2e/bundle.sh build .dev-firsts SHARED_UAI; cuda_exit built into it
# (nvcc -O2 -arch=sm_90 -o .dev-firsts/cuda_exit bench/e2e/cuda_exit.cu).
. "$(dirname "$0")/lib.sh"
e2e_begin firsts
export CUDA_DEVICE_MAX_CONNECTIONS=1
for i in 0 1 2; do
  sleep 3; s=$(date +%s.%N); $B/cuda_exit firsts > $R/firsts-$i.txt; e=$(date +%s.%N)
  echo "firsts $i wall $(awk "BEGIN{print $e - $s}")"; tr '\n' ' ' < $R/firsts-$i.txt; echo
done
unset CUDA_DEVICE_MAX_CONNECTIONS
for i in 0 1; do
  for n in linkage_17 linkage_11 linkage_12; do
    sleep 3; s=$(date +%s.%N)
    $k pe $D/$n.uai --json --order-cache none -v > $R/$n-$i.json 2> $R/$n-$i.log
    e=$(date +%s.%N)
    echo "== $n $i wall $(awk "BEGIN{print $e - $s}") $(grep -o '"log10_pr": [-0-9.e]*' $R/$n-$i.json)"
    grep -E "order search round 0|starting the GPU|plan: reduction|opened in|profile:|GPU: --device|free memory|order annealed|resources at the (GPU open|executor's GPU inputs merged|GPU inputs staged|executor's buckets done|evidence computed|command's end)|staged in|executor: [0-9.]* s" $R/$n-$i.log | cut -c1-230
  done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
