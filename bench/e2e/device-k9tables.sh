#!/bin/bash
# Kernel 9's tables copied to shared memory from global memory (coalesced) instead of the
# constant bank: the kernel test (its kernel 9 case at full scale too), bucket 89's and 44's
# shapes (k9, against kernel 8 in the same process; kernel 9's time before this change is call
# 6's), pedigree50's slices (timelines, against call 5's 100.0-100.5 ms).
# Bundle: bench/e2e/bundle.sh build .dev-k9tables SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin k9tables
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep -E 'kernel 9:' $R/test_gpu_kernel.txt
( cd $B && KINFER_GPU_TEST_SCALE=1 timeout 120 ./run tests/test_gpu_kernel "GpuKernel.Kernel9CasesMatchCpu" ) > $R/k9-full.txt 2>&1; echo "full-scale kernel 9 case exit $?"; grep -E 'kernel 9:' $R/k9-full.txt
bb="$B/run bench/gpu/bucket_bench"
for s in 89:$S89 44:$S44; do
  timeout 120 $bb --config k9 --config k8:KINFER_GPU_LEAN_CHUNKS=0 --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 7 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
  grep -E '^k[89] ' $R/shape${s%%:*}.txt
done
for i in 0 1 2; do
  KINFER_GPU_TIMELINE=$R/p50-$i.tsv timeout 60 $k pe $D/pedigree50.uai --json --max-memory 60G > $R/p50-$i.json 2>/dev/null
  echo "pedigree50 $i: $(grep -o '"log10_pr": [-0-9.e]*' $R/p50-$i.json) $(python3 $B/timeline.py $R/p50-$i.tsv --gap 5 2>/dev/null | head -1 | cut -d: -f2 | cut -c1-70)"
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
