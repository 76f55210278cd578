#!/bin/bash
# Eleventh session: the kernels' launch plans built on the host while the device opens
# (scheduler/runner.cpp start_prebuild, gpu/policy.cpp prebuild_launch_plans;
# KINFER_GPU_PREBUILD=0: built after the device opened, as before): the kernel test, pe --check
# linkage_11/17, cold `pe --device auto` of the linkage networks both ways alternating (three
# rounds), their trails' preparation times, and pedigree50 (60G: not built ahead) once each way.
# Bundle: bench/e2e/bundle.sh build .dev-prebuild SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin prebuild
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
for i in 1 2 3; do
  for n in linkage_11 linkage_17 linkage_12 linkage_13; do
    timeout 60 $k pe $D/$n.uai --json --order-cache none -v > $R/$n-pre-$i.json 2> $R/$n-pre-$i.log
    KINFER_GPU_PREBUILD=0 timeout 60 $k pe $D/$n.uai --json --order-cache none -v > $R/$n-old-$i.json 2> $R/$n-old-$i.log
  done
done
for f in $R/linkage_*-{pre,old}-*.log; do
  echo "$(basename $f .log): $(grep -o 'building [0-9]* kernel launch plans ([0-9.]* MB' $f) | $(grep -o 'kernel plans prepared in [0-9.]* s' $f | head -1) | $(grep -o 'not used' $f | head -1) | $(grep -o '"log10_pr": [-0-9.e]*' ${f%.log}.json)"
done
for i in 1 2 3; do
  M --out "$R/pre.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_12 linkage_13 linkage_14 linkage_18 > /dev/null 2>&1
  KINFER_GPU_PREBUILD=0 M --out "$R/old.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 linkage_12 linkage_13 linkage_14 linkage_18 > /dev/null 2>&1
done
M --out "$R/p50-pre.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
KINFER_GPU_PREBUILD=0 M --out "$R/p50-old.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
for f in pre old p50-pre p50-old; do echo "== $f"; cut -f1-6,8,9 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
