#!/bin/bash
# Kernel 9 as a kernel of its own (lean9_kernel: 32-bit page-local indices, vector row loads,
# chunks of four, compare-and-select max, a table log): the kernel test, --check, pedigree50's
# largest buckets as shapes (first cardinality 6 -> 2) with kernel 9 (k9) and kernel 8 (k8,
# KINFER_GPU_LEAN_CHUNKS=0) in one process, ncu's instruction count on bucket 89's shape, and
# the GPU's busy time of pedigree50 and linkage_11/12/13/17 with each (timelines).
# Bundle: bench/e2e/bundle.sh build .dev-kernel9b SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin kernel9b
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep 'kernel variants' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17 linkage_13
for n in linkage_11 linkage_17 linkage_13; do grep -o "check: [a-z]*.*relative" $R/check-$n.txt | cut -c1-100; done
bb="$B/run bench/gpu/bucket_bench"
CF="--config k9 --config k8:KINFER_GPU_LEAN_CHUNKS=0"
for s in 89:$S89 141:$S141 44:$S44; do
  date +%T
  timeout 120 $bb $CF --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 5 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
  grep -E '^k[89] ' $R/shape${s%%:*}.txt
done
date +%T
ncu --section SpeedOfLight --section InstructionStats --section Occupancy --section WarpStateStats -k regex:lean9_kernel -c 1 \
  $B/run bench/gpu/bucket_bench --shape $S89 --no-f32 --cpu-runs 1 --repeats 1 --out $R/ncu.tsv > $R/ncu89.txt 2>&1; echo "ncu rc=$?"
grep -E 'Duration|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|Achieved Occupancy|Registers Per|Executed Instructions  |Warp Cycles Per Issued' $R/ncu89.txt | head -10
run() { e2e_pe_timeline "$@"; }  # (lib.sh)
for n in pedigree50 linkage_11 linkage_17 linkage_13 linkage_12; do
  run $n-warmup $n
  for i in 1 2; do run $n-k9-$i $n; run $n-k8-$i $n KINFER_GPU_LEAN_CHUNKS=0; done
done
sed -i '/kernel plan of [0-9]\{1,8\} /d; /factor inputs multiplied/d' $R/*.log
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
