#!/bin/bash
# Fifth session's closing check (kernel 6's merged small inputs, kernel 7's one-lane kernel):
# `kinfer calibrate` with the current kernels (45 s, linkage_11/17's buckets in the sweep: the
# shipped profile data/profiles/h100.json was fitted on 2026-11-23's kernels), then, with that
# profile as the shipped one: the GPU kernel test, --check, each bucket's predicted and measured
# kernel time (schedule-compare --bucket-log, for bench/scheduler/repredict against the old
# profile), the cold auto vs cpu table and pedigree50, and the auto rows with the helper exit.
# Bundle: bench/e2e/bundle.sh build .dev-final12 SHARED_UAI
# (its steps moved into lib.sh functions after the run, unchanged)
. "$(dirname "$0")/lib.sh"
e2e_begin final12
e2e_calibrate h100
e2e_gpu_kernel_test
e2e_check linkage_11 linkage_17 linkage_13
e2e_bucket_logs h100 linkage_11 linkage_17
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11
e2e_helper_rows linkage_11 linkage_12 linkage_13 linkage_17
e2e_end 12
