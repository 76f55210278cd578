#!/bin/bash
# Where a kernel's instructions go on pedigree50's bucket 89 shape: its machine code with each
# instruction's executed count and stall samples (ncu's source page, CSV), and its cuobjdump
# listing. usage: device-sass.sh NAME KERNEL_REGEX MANGLED_PART
#   call 2:  device-sass.sh sass plain3_kernel plain3_kernelIdLi2ELi1ELi0ELi2E (kernel 8's
#            one-lane path, two outputs per thread)
#   call 4:  device-sass.sh sass2 lean9_kernel lean9_kernelILi2ELi4ELi2E (kernel 9, first build)
#   call 11: device-sass.sh sass3 lean9_kernel lean9_kernelILi2ELi4ELi2ELb1E (its all-direct case)
#   ninth session: SHAPE="$S2" device-sass.sh sass4 lean9_kernel lean9_kernelILi2ELi4ELi2ELb1E (an
#            M = 2 one-lane bucket of 2^28 outputs, as linkage_11 384 and linkage_17 263)
# SHAPE: another --shape spec than bucket 89's.
# Sum the CSV's "Instructions Executed" and divide by the first instruction's count (the warps)
# and the outputs per thread for instructions per output (docs/perf-notes.md "Kernel 9").
# Bundle: bench/e2e/bundle.sh build .dev-sass SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin $1
timeout 200 ncu --section SourceCounters --section InstructionStats -k regex:$2 -c 1 -o $R/r89 \
  $B/run bench/gpu/bucket_bench --shape ${SHAPE:-$S89} --no-f32 --cpu-runs 1 --repeats 1 --out $R/s.tsv > $R/ncu.txt 2>&1; echo "ncu rc=$?"
ncu -i $R/r89.ncu-rep --page source --csv --print-source sass > $R/sass89.csv 2> $R/sass89.err; echo "source page rc=$? $(wc -l < $R/sass89.csv) lines"
ncu -i $R/r89.ncu-rep --page details --print-details all > $R/details.txt 2>&1
cuobjdump -sass $B/bench/gpu/bucket_bench 2>/dev/null | awk "/Function : .*$3/{p=1} p{print} p&&/^[[:space:]]*\.{10}/{exit}" > $R/sass_$3.txt
echo "cuobjdump lines $(wc -l < $R/sass_$3.txt)"
rm -f $R/r89.ncu-rep; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
