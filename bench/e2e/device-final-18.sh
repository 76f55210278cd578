#!/bin/bash
# Sixth session's closing check with kernel 8 (generation 8): `kinfer calibrate` for the shipped
# h100.json, then with it: the GPU kernel test (its variants case runs kernel 8 on every one-lane
# plan), --check (also with kernel 8 forced), pedigree50's trail, the cold auto vs cpu table and
# pedigree50, and the auto rows with the helper exit.
# Bundle: bench/e2e/bundle.sh build .dev-final18 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final18
e2e_calibrate h100
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
KINFER_GPU_LEAN_TWO=1 timeout 60 $k pe $D/linkage_13.uai --check > $R/check-forced-linkage_13.txt 2>&1; echo "exit $?" >> $R/check-forced-linkage_13.txt
timeout 60 $k pe $D/pedigree50.uai --json --order-cache none --max-memory 60G -v > $R/p50.json 2> $R/p50.log
sed -i '/kernel plan of [0-9]\{1,8\} /d; /factor inputs multiplied/d' $R/p50.log
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
e2e_helper_rows linkage_11 linkage_12 linkage_13 linkage_17
e2e_end 12
