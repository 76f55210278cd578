#!/bin/bash
# Every kernel's exp table copied from global memory (g_exp3) instead of the constant bank: the
# kernel test, --check, and the GPU's busy time of linkage_11/12/13/17 and pedigree50
# (timelines, against calls 5 and 12 of the seventh session).
# Bundle: bench/e2e/bundle.sh build .dev-exptable SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin exptable
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
for n in linkage_11 linkage_17; do grep -o "check: [a-z]*.*relative" $R/check-$n.txt | cut -c1-100; done
for n in linkage_11 linkage_17 linkage_13 linkage_12 pedigree50; do
  e2e_pe_timeline $n-warmup $n
  for i in 1 2; do e2e_pe_timeline $n-$i $n; done
done
sed -i '/kernel plan of [0-9]\{1,8\} /d; /factor inputs multiplied/d' $R/*.log
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
