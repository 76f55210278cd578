#!/bin/bash
# Eleventh session: pinned host buffers kept between executor runs (gpu/context.cu alloc_host /
# free_host; KINFER_GPU_PINNED_KEEP=0: every buffer freed, as before): the kernel test, pe
# --check linkage_11, pe timelines of pedigree50 (six slices: six executor runs) and linkage_11/17
# both ways, three rounds, with each slice's staging time from the trail; then cold pe --device
# auto of pedigree50 (60G) both ways, three rounds.
# Bundle: bench/e2e/bundle.sh build .dev-pinned SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin pinned
e2e_gpu_kernel_test; tail -2 $R/test_gpu_kernel.txt
e2e_check linkage_11
e2e_timelines_ab 3 keep free KINFER_GPU_PINNED_KEEP=0 pedigree50 linkage_11 linkage_17
for f in $R/pedigree50-*.log; do
  python3 - "$f" <<'PY'
import re, sys
t = {}
for l in open(sys.argv[1]):
    m = re.search(r"resources at the (GPU open|GPU inputs staged|executor's buckets done): ([0-9.]+) s", l)
    if m: t.setdefault(m.group(1), []).append(float(m.group(2)))
st = [round(1e3 * (b - a), 1) for a, b in zip(t.get("GPU open", []), t.get("GPU inputs staged", []))]
ex = [round(1e3 * (b - a), 1) for a, b in zip(t.get("GPU open", []), t.get("executor's buckets done", []))]
print(sys.argv[1].split("/")[-1], "staging ms", st, "slice ms", ex)
PY
done
for i in 1 2 3; do
  M --out "$R/keep.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  KINFER_GPU_PINNED_KEEP=0 M --out "$R/free.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
for f in keep free; do echo "== $f"; cut -f1-5,9 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
