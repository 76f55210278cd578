#!/bin/bash
# Fourth session's closing check (kernel 5's tiles, the selector's 4-lane rule): GPU kernel test,
# --check, the selector on linkage_13/17 buckets >= 2^27 (bucket_bench), the cold auto vs cpu
# table and pedigree50, then the auto rows again with the exit through the helper
# (KINFER_EXIT=fast: what the default does under a reaping init).
# Bundle: bench/e2e/bundle.sh build .dev-final11 SHARED_UAI (keep bench/gpu/bucket_bench)
. "$(dirname "$0")/lib.sh"
e2e_begin final11
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17 linkage_13 linkage_12
for n in linkage_13 linkage_17; do
  timeout 60 $B/run bench/gpu/bucket_bench --network $D/$n.uai --min-log2 27 --threads 16 --repeats 3 \
    --cpu-runs 1 --no-f32 --out $R/buckets-$n.tsv > /dev/null 2>&1
  echo "buckets $n rc=$?"; cut -f2,4,6,10,13,14,15,20,22 $R/buckets-$n.tsv
done
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
KINFER_EXIT=fast M --out "$R/helper.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_12 linkage_13 linkage_17
cut -f1-5 $R/helper.tsv
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
e2e_end 12
