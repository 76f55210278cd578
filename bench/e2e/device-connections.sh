#!/bin/bash
# Tenth session: does the number of hardware work queues a context creates
# (CUDA_DEVICE_MAX_CONNECTIONS, default 8) change the device's start? A bare context
# (cuda_exit context) and cold `pe --device auto` of linkage_17 and linkage_11, each after 3 s
# idle, alternating the default and 1 (and 2 for the bare context), and pedigree50 (60G) both
# ways; the whole process timed.
# Bundle: bench/e2e/bundle.sh build .dev-conn SHARED_UAI, with cuda_exit built beside it
#   (nvcc -O2 -arch=sm_90 -o .dev-conn/cuda_exit bench/e2e/cuda_exit.cu)
. "$(dirname "$0")/lib.sh"
e2e_begin conn
ce=$B/cuda_exit
for i in 1 2 3 4; do
  for c in 8 1 2; do
    sleep 3
    s=$(date +%s.%N); out=$(CUDA_DEVICE_MAX_CONNECTIONS=$c $ce context | tr '\n' ' '); e=$(date +%s.%N)
    echo "bare connections=$c round=$i $out process $(python3 -c "print(round($e - $s, 4))")" | tee -a $R/bare.txt
  done
done
for i in 1 2 3; do
  for c in 8 1; do
    for n in linkage_17 linkage_11; do
      sleep 3
      CUDA_DEVICE_MAX_CONNECTIONS=$c M --out "$R/pe-$c.tsv" --devices auto --timeout 40 --deadline 60 $n > /dev/null 2>&1
    done
  done
done
for c in 8 1; do
  sleep 3
  CUDA_DEVICE_MAX_CONNECTIONS=$c M --out "$R/p50-$c.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
for f in pe-8 pe-1 p50-8 p50-1; do echo "== $f"; cut -f1-6 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
