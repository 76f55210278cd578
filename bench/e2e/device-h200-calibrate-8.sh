#!/bin/bash
# Sixth session: the shipped H200 profile recalibrated with kernel 8 (generation 8), then the GPU
# kernel test and `pe --device auto` against `--device cpu` with it as the shipped one.
# Bundle: bench/e2e/bundle.sh build .dev-h200cal8 SHARED_UAI   (machine kind nvidia-h200)
. "$(dirname "$0")/lib.sh"
e2e_begin h200cal8
e2e_calibrate h200
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_tables linkage_11 linkage_13 linkage_17 linkage_14 Pedigree_11
e2e_end 12
