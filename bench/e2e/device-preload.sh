#!/bin/bash
# The kernels' module loaded beside the planning (KINFER_GPU_PRELOAD, default on) against CUDA's
# lazy loading at the first launch (=0) and CUDA_MODULE_LOADING=EAGER: cold `pe --device auto`
# runs interleaved (bench/e2e/ab.py), then one timeline per mode of linkage_17.
# Bundle: bench/e2e/bundle.sh build .dev-preload SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin preload
python3 $B/ab.py --kinfer "$k" --data $D --rounds 5 --out $R/ab.tsv \
  --mode preload= --mode lazy=KINFER_GPU_PRELOAD=0 --mode eager=CUDA_MODULE_LOADING=EAGER,KINFER_GPU_PRELOAD=0 \
  linkage_17 linkage_11 linkage_13 linkage_12 linkage_14 | tee $R/ab.txt
for mode in preload lazy; do
  pre=1; [ $mode = lazy ] && pre=0
  KINFER_GPU_PRELOAD=$pre KINFER_GPU_TIMELINE=$R/linkage_17-$mode.tsv timeout 60 $k pe $D/linkage_17.uai --json --order-cache none -v > $R/linkage_17-$mode.json 2> $R/linkage_17-$mode.log
  python3 $B/timeline.py $R/linkage_17-$mode.tsv --gap 1
  grep -h "opened in\|executor: 0" $R/linkage_17-$mode.log | cut -c 16-200
done
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
