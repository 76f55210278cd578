#!/bin/bash
# Thirteenth session: a profile derived for a GPU no profile knows, checked on a GPU that has
# one. This machine's quick figures (`kinfer calibrate --quick`, three times); then, per
# network and round, cold `pe --device auto` with this GPU's shipped profile hidden (so the run
# derives one from the closest other shipped profile by its quick figures and caches it; later
# runs read the cache) against the same run with the shipped profile. Usage: device-derive.sh
# PROFILE_TO_HIDE (h200.json on the H200). Bundle: bench/e2e/bundle.sh build .dev-derive SHARED_UAI.
. "$(dirname "$0")/lib.sh"
e2e_begin derive
hide=$1
for i in 1 2 3; do $k calibrate --quick; done | tee $R/quick.jsonl
mkdir -p $R/hidden
run() {  # run NETWORK MODE ROUND [pe options]
  local n=$1 mode=$2 i=$3; shift 3
  if [ $mode = derived ]; then
    mv $B/data/profiles/$hide $R/hidden/bundle.json; mv data/profiles/$hide $R/hidden/source.json
    export XDG_CACHE_HOME=$R/cache-d
  else
    export XDG_CACHE_HOME=$R/cache-s
  fi
  sleep 2; local s=$(date +%s.%N)
  $k pe $D/$n.uai --json --order-cache none -v "$@" > $R/$n-$mode-$i.json 2> $R/$n-$mode-$i.log
  local e=$(date +%s.%N)
  if [ $mode = derived ]; then
    mv $R/hidden/bundle.json $B/data/profiles/$hide; mv $R/hidden/source.json data/profiles/$hide
  fi
  echo "$n	$mode	$i	$(awk "BEGIN{print $e - $s}")	$(python3 -c "
import json; j=json.load(open('$R/$n-$mode-$i.json')); s=j['schedule']; t=j['timings']
print(j['log10_pr'], j['device'], t['compute'], s['buckets_gpu'], s['predicted_seconds'], s.get('profile','-').split('/')[-1], sep='\t')")"
  grep -E "derived one|could not derive" $R/$n-$mode-$i.log | cut -c1-600
}
echo "network	mode	round	wall_s	log10_pr	device	compute_s	gpu_buckets	predicted_s	profile"
for i in 0 1; do
  for n in linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_24 DBN_11; do
    run $n derived $i; run $n shipped $i
  done
done
run pedigree50 derived 0 --max-memory 60G; run pedigree50 shipped 0 --max-memory 60G
cp $R/cache-d/kinfer/profiles/*.json $R/ 2>/dev/null
rm -rf $R/cache-s $R/cache-d; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
