#!/bin/bash
# Kernel 9 (one-lane plans: the terms in chunks of four, the last predicated, no rescale in the
# first; KINFER_GPU_LEAN_CHUNKS=0 gives kernel 8's loop): the kernel test (both), --check,
# pedigree50's largest buckets as shapes (first cardinality 6 -> 2) and linkage_11/17's large
# buckets with kernel 9 (k9) and without (k8) in one process, ncu of the one-lane kernel on
# pedigree50's bucket 89 shape with each, and pedigree50's slices (timelines) with each.
# Bundle: bench/e2e/bundle.sh build .dev-kernel9 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin kernel9
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
for n in linkage_11 linkage_17; do grep -o "check: [a-z]*.*relative" $R/check-$n.txt | cut -c1-100; done
bb="$B/run bench/gpu/bucket_bench"
CF="--config k9 --config k8:KINFER_GPU_LEAN_CHUNKS=0"
timeout 150 $bb $CF --shape $S44 --shape $S89 --shape $S141 --no-f32 --cpu-runs 1 --repeats 5 --out $R/shapes.tsv > $R/shapes.txt 2>&1; echo "shapes rc=$?"
grep -E '^k[89] ' $R/shapes.txt
for n in linkage_11 linkage_17; do
  timeout 120 $bb $CF --network $D/$n.uai --min-log2 28 --no-f32 --cpu-runs 1 --repeats 5 --out $R/$n.tsv > $R/$n.txt 2>&1; echo "$n rc=$?"
done
python3 $B/config_pairs.py $R k8 k9
NCU="ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats --section WarpStateStats --section InstructionStats --section LaunchStats -k regex:plain3_kernel -c 1"
for c in 1 0; do
  KINFER_GPU_LEAN_CHUNKS=$c timeout 150 $NCU $B/run bench/gpu/bucket_bench --shape $S89 --no-f32 --cpu-runs 1 --repeats 1 --out $R/ncu$c.tsv > $R/ncu-chunks$c.txt 2>&1; echo "ncu chunks=$c rc=$?"
  grep -E 'Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|Executed Ipc A|Achieved Occupancy|Registers Per|No Eligible|Warp Cycles Per Issued|Executed Instructions  ' $R/ncu-chunks$c.txt | head -14
done
run() { e2e_pe_timeline "$@"; }  # (lib.sh)
for n in pedigree50 linkage_11 linkage_17; do
  run $n-warmup $n
  for i in 1 2; do run $n-k9-$i $n; run $n-k8-$i $n KINFER_GPU_LEAN_CHUNKS=0; done
done
sed -i '/kernel plan of [0-9]\{1,8\} /d; /factor inputs multiplied/d' $R/*.log
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
