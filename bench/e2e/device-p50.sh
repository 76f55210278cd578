#!/bin/bash
# Where pedigree50's plan time goes (2.3 s of 3.5 s end to end under --max-memory 60G; its
# compute 1.0 s): two cold trails with -v.
# Bundle: bench/e2e/bundle.sh build .dev-p50 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin p50
for i in 1 2; do
  KINFER_GPU_TIMELINE=$R/timeline-$i.tsv timeout 60 $k pe $D/pedigree50.uai --json --order-cache none --max-memory 60G -v > $R/p50-$i.json 2> $R/p50-$i.log
  echo "rc=$?"; grep -v "kernel plan of\|factor inputs multiplied\|waited" $R/p50-$i.log | cut -c 1-230 | head -80
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
