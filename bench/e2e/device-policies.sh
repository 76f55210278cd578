#!/bin/bash
# Fourteenth session: is the default placement (comm-aware, from the shipped profile) never slower
# than the better of cpu-only and gpu-only (the issue's part 1)? Per network one order (the first
# run fills the order cache; every later run reads it, so the placements compute the same plan),
# then `pe --device gpu --schedule S` for gpu-only, comm-aware and whole-plan, three rounds
# interleaved, and cpu-only (the same plan on the 16 cores) twice; compute seconds from the JSON.
# Bundle: bench/e2e/bundle.sh build .dev-policies SHARED_UAI.
. "$(dirname "$0")/lib.sh"
e2e_begin policies
run() {  # run NETWORK SCHEDULE ROUND [pe options]
  local n=$1 s=$2 i=$3; shift 3
  timeout 150 $k pe $D/$n.uai --json --device gpu --schedule $s "$@" > $R/$n-$s-$i.json 2> $R/$n-$s-$i.log
  echo "$n	$s	$i	$? $(python3 -c "
import json; j=json.load(open('$R/$n-$s-$i.json')); t=j['timings']; s=j.get('schedule',{})
print('%.4f' % t['compute'], j['log10_pr'], s.get('buckets_gpu','-'), s.get('predicted_seconds','-'), sep='\t')" 2>/dev/null)"
}
echo "network	schedule	round	rc	compute_s	log10_pr	gpu_buckets	predicted_s" | tee $R/policies.tsv
for n in linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 pedigree50; do
  opt=""; [ $n = pedigree50 ] && opt="--max-memory 60G"
  run $n comm-aware warmup $opt > /dev/null
  for i in 0 1 2; do
    for s in gpu-only comm-aware whole-plan; do run $n $s $i $opt | tee -a $R/policies.tsv; done
  done
  for i in 0 1; do
    [ $n = pedigree50 ] && [ $i = 1 ] && continue
    run $n cpu-only $i $opt | tee -a $R/policies.tsv
  done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
