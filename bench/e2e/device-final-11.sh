#!/bin/bash
# Fourth session's closing check (kernel 5's tiles, the selector's 4-lane rule): GPU kernel test,
# --check, the selector on linkage_13/17 buckets >= 2^27 (bucket_bench), the cold auto vs cpu
# table and pedigree50, then the auto rows again with the exit through the helper
# (e2e_helper_rows linkage_11 linkage_12 linkage_13 linkage_17
e2e_end 12
