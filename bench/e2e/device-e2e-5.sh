#!/bin/bash
# Issue 12, end to end, after call 4 (bench/e2e/device-e2e-4.sh): the GPU-sized search at the
# rate measured there (6 nominal core-s per second on 16 cores, was 4; floor 4 device starts, was
# 3), the later rounds' background start with 2x fewer states (linkage_21 started the GPU for a
# CPU plan), a CPU-sized plan not waiting for a background start. Trail (-v) of cold --device
# auto runs, the auto vs cpu table, pedigree50, --check.
# Bundle: bench/e2e/bundle.sh build .dev-e2e5 ../shared/data/uai
. "$(dirname "$0")/lib.sh"
e2e_begin e2e5
e2e_cold3 linkage_11 linkage_17 linkage_13 linkage_12 linkage_14 linkage_18 linkage_21
e2e_tables linkage_14 linkage_18 linkage_11 linkage_12 linkage_13 linkage_17 linkage_16 linkage_21 Pedigree_11 Pedigree_13 pedigree1
e2e_check linkage_17 linkage_12
e2e_end 5
