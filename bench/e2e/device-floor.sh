#!/bin/bash
# Fourteenth session: the GPU-sized search's floor (KINFER_SEARCH_FLOOR_STARTS: 2 today, 4, 6).
# The search at the floor stops at ~0.09 s on 16 threads while a cold device opens at ~0.26 s:
# does searching longer, up to the device's start, buy a better order for free? Per round,
# network and floor: a cold `pe --device auto` (3 s idle before it), then one round back to back
# (no idle: the device opens sooner, so a longer search can cost). Columns: wall, the search's
# length, the device's opening, compute, the order's total state, the answer.
# FLOOR_NAME, FLOORS, ROUNDS and COLD_NETS set another call's (device-floor2.sh).
# Bundle: bench/e2e/bundle.sh build .dev-floor SHARED_UAI.
. "$(dirname "$0")/lib.sh"
e2e_begin ${FLOOR_NAME:-floor}
floors=${FLOORS:-2 4 6}
nets="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 pedigree50"
run() {  # run NETWORK FLOOR LABEL IDLE [pe options]
  local n=$1 f=$2 l=$3 idle=$4; shift 4
  sleep $idle; local s=$(date +%s.%N)
  KINFER_SEARCH_FLOOR_STARTS=$f $k pe $D/$n.uai --json --order-cache none -v "$@" > $R/$n-$f-$l.json 2> $R/$n-$f-$l.log
  local e=$(date +%s.%N)
  echo "$n	$f	$l	$(awk "BEGIN{printf \"%.3f\", $e - $s}")	$(python3 -c "
import json,re; j=json.load(open('$R/$n-$f-$l.json')); t=j['timings']
log=open('$R/$n-$f-$l.log').read()
m=re.search(r'order ([0-9.]+) s \(', log); o=re.search(r'GPU 0 opened in ([0-9.]+) s', log)
st=re.search(r'total state 2\^([0-9.]+)', log); w=re.search(r'search [0-9.]+ s, ([0-9.]+) nominal', log)
print(m.group(1) if m else '-', w.group(1) if w else '-', o.group(1) if o else '-', '%.3f' % t['compute'], st.group(1) if st else '-', j['log10_pr'], j['device'], sep='\t')")"
}
echo "network	floor	label	wall_s	order_s	core_s	device_open_s	compute_s	log2_states	log10_pr	device" | tee $R/floor.tsv
for ((i = 0; i < ${ROUNDS:-3}; ++i)); do
  for n in ${COLD_NETS:-$nets}; do
    for f in $floors; do run $n $f cold$i 3 | tee -a $R/floor.tsv; done
  done
done
for n in $nets; do
  for f in $floors; do run $n $f warm 0 | tee -a $R/floor.tsv; done
done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
