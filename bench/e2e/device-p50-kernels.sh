#!/bin/bash
# pedigree50's slices are 0.165 s each, 90% of it three buckets of 1.4-2.8e9 outputs x 3-4 terms
# (plain, one lane, 2 varying inputs) at ~60 ms each: the variants of the kernel on them, from one
# order (cached after the first run): the default, the lean kernel off, tiles forced, the cached
# kernel (the one-lane selector threshold raised), with each run's timeline.
# Bundle: bench/e2e/bundle.sh build .dev-p50k SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin p50k
run() {  # NAME ENV...
  local name=$1; shift
  env "$@" KINFER_GPU_TIMELINE=$R/$name.tsv timeout 60 $k pe $D/pedigree50.uai --json --max-memory 60G -v > $R/$name.json 2> $R/$name.log
  echo "$name rc=$? $(grep -o '"log10_pr": [-0-9.e]*' $R/$name.json) $(grep -o 'compute_seconds": [0-9.]*\|"seconds": [0-9.]*' $R/$name.json | head -3 | tr '\n' ' ')"
  python3 $B/timeline.py $R/$name.tsv --gap 2 | head -1
  grep "kernel plan of [0-9]\{9,\}" $R/$name.log | cut -c 16-200 | head -4
}
run warmup
for i in 1 2; do
  run default-$i
  run nolean-$i KINFER_GPU_LEAN=0
  run tiles-$i KINFER_GPU_LEAN=0 KINFER_GPU_TILES=force
  run cached-$i KINFER_GPU_SELECT=1000:0
done
sed -i '/kernel plan of [0-9]\{1,8\} /d; /factor inputs multiplied/d' $R/*.log
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
