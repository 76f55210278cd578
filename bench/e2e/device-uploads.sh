#!/bin/bash
# Where linkage_11/17's GPU thread waits "for its uploads" (28.6 ms at linkage_17's bucket 200,
# 34 ms at linkage_11's 614, the same to 0.1 ms run to run: GPU work, not noise): the trails with
# lazy and eager module loading, and an nsys timeline (CUDA API + GPU trace) where nsys exists.
# Bundle: bench/e2e/bundle.sh build .dev-uploads SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin uploads
{ command -v nsys ncu; ls -d /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems* /usr/local/cuda*/nsight-systems* 2>/dev/null; } > $R/tools.txt 2>&1
cat $R/tools.txt
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
for n in linkage_17 linkage_11 linkage_13; do
  for mode in LAZY EAGER LAZY EAGER; do
    i=$((${i:-0} + 1))
    CUDA_MODULE_LOADING=$mode timeout 60 $k pe $D/$n.uai --json --order-cache none -v > $R/$n-$mode-$i.json 2> $R/$n-$mode-$i.log
    echo "$n $mode rc=$? $(grep -h "executor: 0" $R/$n-$mode-$i.log | cut -c 1-260)"
  done
done
if [ -n "$NSYS" ]; then
  for n in linkage_17 linkage_11; do
    timeout 120 $NSYS profile -t cuda,osrt --cuda-memory-usage=false -o $R/$n-nsys -f true \
      $k pe $D/$n.uai --json --order-cache none -v > $R/$n-nsys.out 2>&1
    echo "nsys $n rc=$?"
    timeout 120 $NSYS stats -r cuda_gpu_trace,cuda_api_trace,cuda_gpu_kern_sum -f csv -o $R/$n $R/$n-nsys.nsys-rep > $R/$n-stats.out 2>&1
    echo "stats $n rc=$?"; ls $R | grep $n | head -20
    rm -f $R/$n-nsys.sqlite
  done
fi
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
