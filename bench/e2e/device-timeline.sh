#!/bin/bash
# The GPU thread's timeline (KINFER_GPU_TIMELINE) of cold `pe --device auto` runs of
# linkage_17/11/13, lazy and eager module loading: the GPU's idle gaps and what the host did then.
# Bundle: bench/e2e/bundle.sh build .dev-timeline SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin timeline
for n in linkage_17 linkage_11 linkage_13 linkage_12; do
  for mode in LAZY EAGER LAZY; do
    i=$((${i:-0} + 1))
    KINFER_GPU_TIMELINE=$R/$n-$mode-$i.tsv CUDA_MODULE_LOADING=$mode timeout 60 $k pe $D/$n.uai --json --order-cache none -v > $R/$n-$mode-$i.json 2> $R/$n-$mode-$i.log
    echo "$n $mode rc=$? $(grep -h "executor: 0" $R/$n-$mode-$i.log | cut -c 16-120)"
    python3 $B/timeline.py $R/$n-$mode-$i.tsv --gap 0.5
  done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
