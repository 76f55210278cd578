#!/bin/bash
# Kernel 9 with the selector's rule for it (one-lane buckets of M <= 12 that kernel 9 takes go to
# it, not to the cached kernel): the kernel test, --check, the selector's choice and time on
# pedigree50's bucket 44 and 89 shapes and on linkage_11/17's buckets of >= 2^28 states, with
# kernel 9 (k9) and without it (k8, KINFER_GPU_LEAN_CHUNKS=0: kernel 8 and the old rule).
# Bundle: bench/e2e/bundle.sh build .dev-final19 SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin final19
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep 'kernel variants' $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
for n in linkage_11 linkage_17; do grep -o "check: [a-z]*.*relative" $R/check-$n.txt | cut -c1-100; done
bb="$B/run bench/gpu/bucket_bench"
CF="--config k9 --config k8:KINFER_GPU_LEAN_CHUNKS=0"
for s in 44:$S44 89:$S89; do
  timeout 120 $bb $CF --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 5 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
  grep -E '^k[89] ' $R/shape${s%%:*}.txt
done
for n in linkage_11 linkage_17; do
  timeout 110 $bb $CF --network $D/$n.uai --min-log2 28 --no-f32 --cpu-runs 1 --repeats 5 --out $R/$n.tsv > $R/$n.txt 2>&1; echo "$n rc=$?"
done
python3 $B/config_pairs.py $R k8 k9
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
