#!/bin/bash
# Ninth session: the census of the buckets of >= 1 GFLOP against the HBM roofline on main as it
# is (search version 4 and the CPU-sized search's new rate: bucket_bench's own orders differ from
# roof9's), each bucket as the plan has it and, where the executor merges its small factor
# inputs (gpu/merge_inputs.hpp), as the executor runs it (bucket_bench --merge: NAME+merge rows);
# linkage_11/12/13/17/18 and kernel_compare.sh's random buckets (seed 5).
# Summary: bench/gpu/roofline_census.py.
# The tenth session ran it again after kernel 9's compiled terms as ROOF_NAME=roof11.
# Bundle: bench/e2e/bundle.sh build .dev-$ROOF_NAME SHARED_UAI (keep bench/gpu)
. "$(dirname "$0")/lib.sh"
e2e_begin ${ROOF_NAME:-roof10}
export KINFER_ORDER_CACHE=$R/orders
bb() {  # NAME ARGS...
  local name=$1; shift
  timeout $T $B/run bench/gpu/bucket_bench "$@" --threads 16 --repeats 3 --cpu-runs 1 --no-f32 \
    --out $R/$name.tsv > $R/$name.log 2>&1
  echo "bucket_bench $name rc=$? $(tail -1 $R/$name.log | cut -c1-150)"
}
T=95 bb linkage_17 --network $D/linkage_17.uai --min-log2 26 --merge
T=95 bb linkage_11 --network $D/linkage_11.uai --min-log2 26 --merge
T=80 bb linkage_13 --network $D/linkage_13.uai --min-log2 26 --merge
T=80 bb linkage_12 --network $D/linkage_12.uai --min-log2 26 --merge
T=60 bb linkage_18 --network $D/linkage_18.uai --min-log2 25 --merge
T=90 bb random --random 24 --min-log2 25 --max-log2 29 --seed 5
python3 $B/roofline_census.py $R/*.tsv > $R/census.txt 2>&1; tail -30 $R/census.txt
rm -rf $R/cache $R/orders; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
