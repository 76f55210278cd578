#!/bin/bash
# Eleventh session: kernel 9's two outputs per thread (kernel 8's rule, lean_two_min_items =
# 2^22 items, tuned before kernel 9 existed) against one (KINFER_GPU_LEAN_TWO=0), same process:
# the M = 2-8 shapes and pedigree50's bucket 203 (M = 3, its first variable 6 -> 2: 467 M
# outputs), then pe timelines of pedigree50 and linkage_11/17 both ways.
# Bundle: bench/e2e/bundle.sh build .dev-outs SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin outs
P203S='2,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3,3/1/0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,18/0,1,2,4,6,7,8,9,10,11,13,17,18'
e2e_shapes_ab two one:KINFER_GPU_LEAN_TWO=0 203s:$P203S 2:$S2 89:$S89 44:$S44 6:$S6 8M:$S8M
e2e_timelines_ab 2 two one KINFER_GPU_LEAN_TWO=0 pedigree50 linkage_11 linkage_17
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
