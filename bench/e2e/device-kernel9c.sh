#!/bin/bash
# Kernel 9 with its all-direct case compiled apart (ALL_DIRECT: term loads at immediate offsets
# from a pointer advanced per chunk): as device-kernel9b.sh (kernel test, --check, pedigree50's
# bucket 89 and 141 shapes with kernel 9 and kernel 8, ncu, timelines), plus linkage_11/17's
# buckets of >= 2^28 states with each (the roofline's one-lane buckets).
# Bundle: bench/e2e/bundle.sh build .dev-kernel9c SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin kernel9c
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep 'kernel variants' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17 linkage_13
for n in linkage_11 linkage_17 linkage_13; do grep -o "check: [a-z]*.*relative" $R/check-$n.txt | cut -c1-100; done
bb="$B/run bench/gpu/bucket_bench"
CF="--config k9 --config k8:KINFER_GPU_LEAN_CHUNKS=0"
for s in 89:$S89 141:$S141; do
  date +%T
  timeout 120 $bb $CF --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 5 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
  grep -E '^k[89] ' $R/shape${s%%:*}.txt
done
for n in linkage_11 linkage_17; do
  timeout 100 $bb $CF --network $D/$n.uai --min-log2 28 --no-f32 --cpu-runs 1 --repeats 5 --out $R/$n.tsv > $R/$n.txt 2>&1; echo "$n rc=$?"
done
python3 $B/config_pairs.py $R k8 k9
date +%T
ncu --section SpeedOfLight --section InstructionStats --section Occupancy --section WarpStateStats --section SchedulerStats -k regex:lean9_kernel -c 1 \
  $B/run bench/gpu/bucket_bench --shape $S89 --no-f32 --cpu-runs 1 --repeats 1 --out $R/ncu.tsv > $R/ncu89.txt 2>&1; echo "ncu rc=$?"
grep -E 'Duration|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|Achieved Occupancy|Registers Per|Executed Instructions  |Warp Cycles Per Issued' $R/ncu89.txt | head -10
run() { e2e_pe_timeline "$@"; }  # (lib.sh)
for n in pedigree50 linkage_11 linkage_17; do
  run $n-warmup $n
  for i in 1 2; do run $n-k9-$i $n; run $n-k8-$i $n KINFER_GPU_LEAN_CHUNKS=0; done
done
sed -i '/kernel plan of [0-9]\{1,8\} /d; /factor inputs multiplied/d' $R/*.log
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
