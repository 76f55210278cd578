#!/bin/bash
# Tenth session: kernel 9's compiled terms finished one output behind their loads (the next
# output's loads issued before this one's exp, log and store), measured as fixed3 (compiled
# against the chunk loop, KINFER_GPU_LEAN_FIXED=0, in one process; fixed3's compiled numbers are
# the build without the pipelining): the kernel test (its fixed-terms case at
# full scale too), pe --check linkage_11/17/13, shapes of M = 2, 3, 4 (as in fixed2) and of M = 6
# and 8, direct and mixed (pedigree50's shape 89 / S4M with other summed cardinalities, one
# output variable 5 -> 2), the census's random set of seed 5 (buckets 0-12: random 10 and 12
# are one-lane, M = 2 and 6), and pe timelines of linkage_11/17 and pedigree50 both ways.
# Bundle: bench/e2e/bundle.sh build .dev-pipe SHARED_UAI (bench/gpu kept), sent as a .tgz
. "$(dirname "$0")/lib.sh"
e2e_begin pipe
S4M='2,2,5,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,2,2/2/0,1,2,3,4,5,9,10,12,13,14,15,18/1,6,7,8,11,16,17,18,19'
I89='0,1,2,3,4,5,6,7,8,10,11,12,13,14,15,16,17,18/0,2,4,5,7,9,10,11,13,14,15,16,18'
IM='0,1,2,3,4,5,9,10,12,13,14,15,18/1,6,7,8,11,16,17,18,19'
S6="2,2,2,2,5,6,2,2,2,3,6,2,3,5,3,2,5,3,6/1/$I89"
S8="2,2,2,2,5,6,2,2,2,3,6,2,3,5,3,2,5,3,8/1/$I89"
S6M="2,2,2,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,2,3/2/$IM"
S8M="2,2,2,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,2,4/2/$IM"
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt; grep -E 'kernel 9' $R/test_gpu_kernel.txt | head -3
( cd $B && KINFER_GPU_TEST_SCALE=1 timeout 150 ./run tests/test_gpu_kernel "GpuKernel.Kernel9FixedTermsMatchCpu" ) > $R/k9fixed-full.txt 2>&1; echo "full-scale fixed-terms case exit $?"; grep -E 'kernel 9' $R/k9fixed-full.txt
e2e_check linkage_11 linkage_17 linkage_13
for n in linkage_11 linkage_17 linkage_13; do echo "check $n: $(tail -2 $R/check-$n.txt | tr '\n' ' ' | cut -c1-160)"; done
bb="$B/run bench/gpu/bucket_bench"
for s in 2:$S2 89:$S89 44:$S44 4m:$S4M 6:$S6 6m:$S6M 8:$S8 8m:$S8M; do
  timeout 100 $bb --config fixed --config loop:KINFER_GPU_LEAN_FIXED=0 --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 7 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
  grep -E '^(fixed|loop) ' $R/shape${s%%:*}.txt
done
for i in 0; do
  for n in linkage_11 linkage_17 pedigree50; do
    e2e_pe_timeline $n-fixed-$i $n
    e2e_pe_timeline $n-loop-$i $n KINFER_GPU_LEAN_FIXED=0
  done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
