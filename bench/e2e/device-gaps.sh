#!/bin/bash
# Issue 12: where linkage_11's GPU thread waits (executor: "waiting for uploads 0.076 s" of 0.13 s).
# nsys when the machine has it (kernel time summed vs the executor's wall); else the executor's
# per-bucket timing (kinfer schedule-compare --bucket-log: each GPU bucket synchronized and timed).
set -u
B=${B:-.dev-gaps}; R=$OUT/gaps; mkdir -p $R
export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles
k="$B/run apps/kinfer"; D=$B/data/uai
for p in nsys /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do command -v $p && break; done > $R/nsys.txt 2>&1
ls /usr/local/cuda/bin /opt/nvidia 2>&1 | head -50 >> $R/nsys.txt
NSYS=$(head -1 $R/nsys.txt)
$k pe $D/linkage_11.uai --json -v > $R/warm-fill.log 2>&1   # fills the order cache: same order below
if [ -x "$NSYS" ]; then
  $NSYS profile -o $R/l11 -t cuda,osrt --force-overwrite true $k pe $D/linkage_11.uai -v > $R/nsys-run.log 2>&1
  $NSYS stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum $R/l11.nsys-rep > $R/nsys-stats.txt 2>&1
  rm -f $R/l11.nsys-rep $R/l11.sqlite
fi
timeout 200 $k schedule-compare $D/linkage_11.uai --repeat 1 --profile $B/data/profiles/h100.json --bucket-log $R/l11-buckets.tsv > $R/schedule.log 2>&1
for i in 1 2 3; do $k pe $D/linkage_11.uai --json -v > $R/warm$i.log 2>&1; done
grep -h "executor" $R/warm1.log $R/warm2.log | cut -c15-300
head -40 $R/nsys-stats.txt 2>/dev/null
rm -rf $R/cache; tar -C $OUT -czf $OUT/gaps.tgz gaps && rm -rf $R
