#!/bin/bash
# Twelfth session: where a slice's time goes besides the GPU's work (pedigree50's slices 2-6: the
# executor 53-55 ms against 46.5-47 ms of GPU busy). pe pedigree50 (60G) and linkage_17 with -v
# and a timeline, twice each; the executor's lines (now with the GPU thread's start and end) and
# the trail's resource lines printed.
# Bundle: bench/e2e/bundle.sh build .dev-slices SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin slices
for i in 0 1; do e2e_pe_timeline pedigree50-$i pedigree50; e2e_pe_timeline linkage_17-$i linkage_17; done
for f in $R/*.log; do
  echo "== $(basename $f)"
  grep -E "executor: [0-9.]* s|resources at the (GPU open|executor's GPU inputs merged|GPU inputs staged|executor's buckets done)" $f | cut -c1-150
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
