#!/bin/bash
# Twelfth session: the plain kernel's page offsets (out_hi) of >= 1 MB filled on the device
# from their strides (gpu/sum_product.cu fill_offsets_kernel; KINFER_GPU_DEVICE_FILL=0: built on
# the host as before), beside the kernel plans built beside the run. The kernel test (with the
# new variant KINFER_GPU_DEVICE_FILL=1: every plain plan's offsets filled on the device), pe
# --check linkage_11/12/17, pe timelines both ways (three rounds; the executor's line of each),
# then cold `pe --device auto` both ways alternating (three rounds) and pedigree50 (60G).
# Bundle: bench/e2e/bundle.sh build .dev-fill SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin fill
e2e_gpu_kernel_test; grep -E "DEVICE_FILL|passed|failed" $R/test_gpu_kernel.txt | tail -3
e2e_check linkage_11 linkage_12 linkage_17
e2e_timelines_ab 3 dev host KINFER_GPU_DEVICE_FILL=0 linkage_11 linkage_17 linkage_13 linkage_12 pedigree50
for f in $R/*.log; do
  echo "$(basename $f .log): $(grep -o 'executor: [0-9.]* s; kernel plans prepared in [0-9.]* s[^;]*' $f | head -1 | cut -c1-120) | $(grep -c 'for its kernel plan' $f) plan waits"
done
grep -h "kernel plan of" $R/linkage_11-dev-1.log | sort -t'n' -k1 | cut -c16-220 | head -8
for i in 1 2 3; do
  M --out "$R/dev.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_13 linkage_12 > /dev/null 2>&1
  KINFER_GPU_DEVICE_FILL=0 M --out "$R/host.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_13 linkage_12 > /dev/null 2>&1
done
for i in 1 2; do
  M --out "$R/p50-dev.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  KINFER_GPU_DEVICE_FILL=0 M --out "$R/p50-host.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
for f in dev host p50-dev p50-host; do echo "== $f"; cut -f1-6,9,10 $R/$f.tsv; done
e2e_left
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
