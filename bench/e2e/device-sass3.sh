#!/bin/bash
# Where kernel 9's (lean9_kernel, its all-direct case) instructions go on pedigree50's bucket 89 shape (ncu counted ~262
# warp instructions per output): its machine code with each instruction's executed count, and
# its cuobjdump listing.
# Bundle: bench/e2e/bundle.sh build .dev-sass SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin sass3
S89='2,2,5,2,5,6,2,2,2,3,6,2,3,5,3,2,5,3,3/1/0,1,2,3,4,5,6,7,8,10,11,12,13,14,15,16,17,18/0,2,4,5,7,9,10,11,13,14,15,16,18'
timeout 200 ncu --section SourceCounters --section InstructionStats -k regex:lean9_kernel -c 1 -o $R/r89 \
  $B/run bench/gpu/bucket_bench --shape $S89 --no-f32 --cpu-runs 1 --repeats 1 --out $R/s.tsv > $R/ncu.txt 2>&1; echo "ncu rc=$?"
ncu -i $R/r89.ncu-rep --page source --csv --print-source sass > $R/sass89.csv 2> $R/sass89.err; echo "source page rc=$? $(wc -l < $R/sass89.csv) lines"
ncu -i $R/r89.ncu-rep --page details --print-details all > $R/details.txt 2>&1
cuobjdump -sass $B/bench/gpu/bucket_bench 2>/dev/null | awk '/Function : .*lean9_kernelILi2ELi4ELi2ELb1E/{p=1} p{print} p&&/\.L_x_[0-9]+:$/{n++} p&&/^[[:space:]]*\.{10}/{exit}' > $R/sass_lean9_2_4_2_direct.txt
echo "cuobjdump lines $(wc -l < $R/sass_lean9_2_4_2_direct.txt)"
rm -f $R/r89.ncu-rep.bak; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
