#!/bin/bash
# Fifth session, call 6: the lanes rule for the sums of 32-512 terms after kernels 6-7 (the
# many-input buckets merged to 3-4 inputs sit just under half the roofline at M = 32-72):
# every bucket >= 2^26 states of linkage_17/11 (as the executor merges them: --merge) and 45
# random ones under the defaults (lanes 4:64), 1:256 (fewer lanes, down to one) and 2:128.
# Bundle: bench/e2e/bundle.sh build .dev-lanes SHARED_UAI (keep bench/gpu/bucket_bench)
. "$(dirname "$0")/lib.sh"
e2e_begin lanes
CFG="--config main --config l1:KINFER_GPU_LANES=1:256 --config l2:KINFER_GPU_LANES=2:128"
for n in linkage_17 linkage_11; do
  timeout 150 $B/run bench/gpu/bucket_bench --network $D/$n.uai --min-log2 26 --threads 16 --repeats 5 \
    --cpu-runs 1 --no-f32 --merge $CFG --out $R/$n.tsv > $R/bench-$n.log 2>&1
  echo "buckets $n rc=$?"
done
timeout 100 $B/run bench/gpu/bucket_bench --random 45 --min-log2 22 --max-log2 27 --threads 16 --repeats 5 \
  --cpu-runs 1 --no-f32 $CFG --out $R/random.tsv > $R/bench-random.log 2>&1
echo "buckets random rc=$?"
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
