#!/bin/bash
# Twelfth session (measured, not kept: the change was reverted): the kernel plans prepared in the background as soon as pe's plan is made with
# the GPU open (Runner::prepare_kernels, beside the estimate, the auto decision and the
# placement), against KINFER_GPU_EARLY_PREPARE=0. The kernel test and pe --check linkage_11/17
# first; pe timelines both ways (three rounds; the executor's line, the GPU's first kernel and
# last end), then cold `pe --device auto` both ways alternating (four rounds) and pedigree50
# (60G, two).
# Bundle: bench/e2e/bundle.sh build .dev-early SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin early
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11 linkage_17
NETS="linkage_11 linkage_17 linkage_13 linkage_12"
e2e_timelines_ab 3 early late KINFER_GPU_EARLY_PREPARE=0 $NETS > $R/timelines.txt
for f in $R/*-early-*.log $R/*-late-*.log; do
  t=${f%.log}.tsv
  echo "$(basename $f .log): $(grep -o 'executor: [0-9.]* s; kernel plans prepared in [0-9.]* s[^;]*' $f | head -1 | cut -c1-110) | $(python3 - $t <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
b = min(float(r["gpu_begin"]) for r in rows); e = max(float(r["gpu_end"]) for r in rows)
busy = sum(float(r["gpu_end"]) - float(r["gpu_begin"]) for r in rows)
print(f"first kernel {1e3*b:.1f} ms, last end {1e3*e:.1f}, busy {1e3*busy:.1f}")
PY
)"
done
for i in 1 2 3 4; do
  M --out "$R/early.tsv" --devices auto --timeout 40 --deadline 60 $NETS > /dev/null 2>&1
  KINFER_GPU_EARLY_PREPARE=0 M --out "$R/late.tsv" --devices auto --timeout 40 --deadline 60 $NETS > /dev/null 2>&1
done
for i in 1 2; do
  M --out "$R/p50-early.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  KINFER_GPU_EARLY_PREPARE=0 M --out "$R/p50-late.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
for f in early late p50-early p50-late; do echo "== $f"; cut -f1,3-6,9 $R/$f.tsv | tail -n +2; done
e2e_left
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
