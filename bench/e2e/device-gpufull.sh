#!/bin/bash
# Fourteenth session: the GPU's memory running out during a run (DeviceMemoryError: the runner
# computes on the CPU instead, or refuses with exit 3 when the CPU's peak exceeds --max-memory).
# Four `pe pedigree50` started together on one H100: each reads ~79 GiB free when its device
# opens and plans six slices of ~21 GiB, so together they need ~84 GiB and at least one's
# allocations fail. Every answer must be the reference's (-22.88) or a refusal with exit 3.
# Second call (GPUFULL_NAME=gpufull2, after Runner::fit_to_free_device): first one pedigree50
# and one linkage_17 alone (no conditioning at run time expected), then the four together.
# Bundle: bench/e2e/bundle.sh build .dev-gpufull SHARED_UAI.
. "$(dirname "$0")/lib.sh"
e2e_begin ${GPUFULL_NAME:-gpufull}
for n in pedigree50 linkage_17; do
  s=$(date +%s.%N); $k pe $D/$n.uai --json --order-cache none -v > $R/$n-alone.json 2> $R/$n-alone.log
  echo "$n alone rc=$? wall $(awk "BEGIN{print $(date +%s.%N) - $s}") $(grep -o '"log10_pr": [-0-9.e]*' $R/$n-alone.json) run-time conditionings: $(grep -c 'usable now' $R/$n-alone.log)"
done
sleep 2
for i in 0 1 2 3; do
  ( s=$(date +%s.%N); timeout 280 $k pe $D/pedigree50.uai --json --order-cache none -v > $R/p50-$i.json 2> $R/p50-$i.log; rc=$?
    echo "run $i rc=$rc wall $(awk "BEGIN{print $(date +%s.%N) - $s}")" > $R/p50-$i.rc ) &
done
wait
for i in 0 1 2 3; do
  cat $R/p50-$i.rc
  python3 -c "
import json; j=json.load(open('$R/p50-$i.json')); s=j.get('schedule',{})
print(' ', j['log10_pr'], j['device'], 'compute', j['timings']['compute'], 'note:', s.get('note','')[:300])" 2>/dev/null
  grep -E "warning|error|GPU memory|ran out|usable now|runs on the CPU" $R/p50-$i.log | cut -c1-400 | head -6
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
