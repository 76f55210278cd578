#!/bin/bash
# Twelfth session, closing table on the final build (plans built beside the run, page offsets
# filled on the device, 1024 terms a split lane): the kernel test and pe --check
# linkage_11/12/17, then device-final-31.sh's steps (every shared network cold under
# `--device cpu`, 16 cores, then `--device auto`, `--max-memory 100G`; pedigree50 under 60G x3,
# 100G, the default; every auto run again at the end); last, the roofline census of linkage_17's
# and linkage_18's buckets (>= 2^26 states, as run: --merge) on this build.
# Bundle: bench/e2e/bundle.sh build .dev-final33 SHARED_UAI (bench/gpu kept, roofline_census.py
# beside the scripts)
. "$(dirname "$0")/lib.sh"
e2e_begin ${FINAL_NAME:-final33}
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'DEVICE_FILL' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_12 linkage_17
e2e_closing $E2E_SHARED_NETS
for n in linkage_17 linkage_18; do
  timeout 150 $B/run bench/gpu/bucket_bench --network $D/$n.uai --min-log2 26 --merge \
    --threads 16 --repeats 3 --cpu-runs 1 --no-f32 --out $R/census-$n.tsv > $R/census-$n.log 2>&1
  echo "census $n rc=$?"
done
python3 $B/roofline_census.py $R/census-*.tsv > $R/census.txt 2>&1; cat $R/census.txt
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
