#!/bin/bash
# Thirteenth session: how the CPU's compute scales with its thread count, against the shipped
# profile's CPU part (fitted on this machine's 16 threads): `pe --device cpu --threads T --seed 1`
# (the same order at every T) of linkage_14/18/17/24 and DBN_11, T = 16, 8, 4, 2 (linkage_17:
# 16, 8, 4), and one `pe --device auto --seed 1 -v` of each for the profile's 16-thread CPU
# prediction ("predicted ... on the CPU"). Bundle: bench/e2e/bundle.sh build .dev-threads SHARED_UAI.
. "$(dirname "$0")/lib.sh"
e2e_begin threads
echo "network	threads	compute_s	plan_s	log10_pr"
for n in linkage_14 linkage_18 linkage_24 DBN_11 linkage_17; do
  ts="16 8 4 2"; [ $n = linkage_17 ] && ts="16 8 4"
  for T in $ts; do
    $k pe $D/$n.uai --device cpu --threads $T --seed 1 --order-cache none --json > $R/$n-$T.json 2> $R/$n-$T.log
    echo "$n	$T	$(python3 -c "import json; j=json.load(open('$R/$n-$T.json')); t=j['timings']; print(t['compute'], t['plan'], j['log10_pr'], sep='\t')")"
  done
  $k pe $D/$n.uai --seed 1 --order-cache none --json -v > $R/$n-auto.json 2> $R/$n-auto.log
  grep -E "GPU: --device|CPU: --device" $R/$n-auto.log | cut -c1-250
done
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
