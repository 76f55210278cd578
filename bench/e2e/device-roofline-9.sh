#!/bin/bash
# The buckets of >= 1 GFLOP against the HBM roofline with kernel 9 and its selector rule (k9, the default) and without
# them (k8: KINFER_GPU_LEAN_CHUNKS=0), same process and buckets (bucket_bench --config): linkage_11/12/
# 13/17/18 (their 5 s bucket_bench orders) and kernel_compare.sh's 24 random buckets (seed 5);
# bench/gpu/compare.py --before k8 --after k9.
# Bundle: bench/e2e/bundle.sh build .dev-roof9 SHARED_UAI (keep bench/gpu)
. "$(dirname "$0")/lib.sh"
e2e_begin roof9
export KINFER_ORDER_CACHE=$R/orders
bb() {  # NAME ARGS...
  local name=$1; shift
  timeout $T $B/run bench/gpu/bucket_bench "$@" --threads 16 --repeats 5 --cpu-runs 1 --no-f32 \
    --config k8:KINFER_GPU_LEAN_CHUNKS=0 --config k9 --out $R/$name.tsv > $R/$name.log 2>&1
  echo "bucket_bench $name rc=$? $(tail -1 $R/$name.log | cut -c1-150)"
}
T=100 bb linkage_17 --network $D/linkage_17.uai --min-log2 26
T=100 bb linkage_11 --network $D/linkage_11.uai --min-log2 26
T=85 bb linkage_13 --network $D/linkage_13.uai --min-log2 26
T=85 bb linkage_12 --network $D/linkage_12.uai --min-log2 26
T=60 bb linkage_18 --network $D/linkage_18.uai --min-log2 25
T=100 bb random --random 24 --min-log2 25 --max-log2 29 --seed 5
cp $B/compare.py $R/ 2>/dev/null
python3 $B/compare.py $R 1.0 --before k8 --after k9 > $R/compare.txt 2>&1; tail -25 $R/compare.txt
rm -rf $R/cache $R/orders; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
