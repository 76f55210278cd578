#!/bin/bash
# Tenth session, second call: kernel 9 compiled for 2-4 terms (M = 4 also with mixed inputs;
# KINFER_GPU_LEAN_FIXED=0: the chunk loop as before), same process: the kernel test (its new fixed-terms case at full scale too),
# pe --check linkage_11/17/13, the M = 2 shape S2, pedigree50's M = 3 shape 89 and M = 4 shape 44
# (now compiled too), S4M (mixed, M = 4), and pe timelines of linkage_11/17 and pedigree50 both ways.
# Bundle: bench/e2e/bundle.sh build .dev-fixed2 SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin fixed2
# S44 with its summed variable of 4 values as two binary ones, the first input holding only the
# first (not direct): the mixed M = 4 family
S4M='2,2,5,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,2,2/2/0,1,2,3,4,5,9,10,12,13,14,15,18/1,6,7,8,11,16,17,18,19'
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'kernel 9' $R/test_gpu_kernel.txt | head -3
( cd $B && KINFER_GPU_TEST_SCALE=1 timeout 120 ./run tests/test_gpu_kernel "GpuKernel.Kernel9FixedTermsMatchCpu" ) > $R/k9fixed-full.txt 2>&1; echo "full-scale fixed-terms case exit $?"; grep -E 'kernel 9' $R/k9fixed-full.txt
e2e_check linkage_11 linkage_17 linkage_13
for n in linkage_11 linkage_17 linkage_13; do echo "check $n: $(tail -2 $R/check-$n.txt | tr '\n' ' ' | cut -c1-160)"; done
bb="$B/run bench/gpu/bucket_bench"
for s in 2:$S2 89:$S89 44:$S44 4m:$S4M; do
  timeout 100 $bb --config fixed --config loop:KINFER_GPU_LEAN_FIXED=0 --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 7 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
  grep -E '^(fixed|loop) ' $R/shape${s%%:*}.txt
done
for i in 0 1; do
  for n in linkage_11 linkage_17 pedigree50; do
    e2e_pe_timeline $n-fixed-$i $n
    e2e_pe_timeline $n-loop-$i $n KINFER_GPU_LEAN_FIXED=0
  done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
