#!/bin/bash
# Thirteenth session: the GPU's quick figures (`kinfer calibrate --quick`, three times) for the
# shipped profile of this machine's GPU, and the derived profile's plumbing on a real GPU: the
# shipped profile of this GPU under another name, with these figures, as the only base (so the
# derivation's factors are ~1), cold `pe --device auto` of linkage_17/11/12 with it (the first run
# derives and caches, the later ones read the cache) against the shipped profile itself.
# Bundle: bench/e2e/bundle.sh build .dev-quick SHARED_UAI. Usage: device-quick.sh PROFILE (h100.json).
. "$(dirname "$0")/lib.sh"
e2e_begin quick
prof=$1
for i in 1 2 3; do $k calibrate --quick; done | tee $R/quick.jsonl
mkdir -p $R/base
python3 - $B/data/profiles/$prof $R/quick.jsonl $R/base/base.json <<'PY'
import json, statistics, sys
p = json.load(open(sys.argv[1]))
q = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
p["gpu"]["quick"] = {k: statistics.median(x[k] for x in q) for k in ("copy_bandwidth", "h2d_bandwidth", "d2h_bandwidth")}
p["gpu"]["name"] += " (as a base)"
json.dump(p, open(sys.argv[3], "w"))
PY
for mode in derived shipped; do
  for i in 0 1; do
    for n in linkage_17 linkage_11 linkage_12; do
      if [ $mode = derived ]; then export KINFER_PROFILES=$PWD/$R/base XDG_CACHE_HOME=$R/cache-d
      else export KINFER_PROFILES=$PWD/$B/data/profiles XDG_CACHE_HOME=$R/cache-s; fi
      sleep 2; s=$(date +%s.%N)
      $k pe $D/$n.uai --json --order-cache none -v > $R/$n-$mode-$i.json 2> $R/$n-$mode-$i.log
      e=$(date +%s.%N)
      echo "== $n $mode $i wall $(awk "BEGIN{print $e - $s}") $(python3 -c "import json,sys; j=json.load(open('$R/$n-$mode-$i.json')); print(j['log10_pr'], j['timings']['compute'], j['schedule']['buckets_gpu'], j['schedule'].get('profile'))")"
      grep -E "derived one|GPU: --device|could not derive" $R/$n-$mode-$i.log | cut -c1-400
    done
  done
done
ls -la $R/cache-d/kinfer/profiles/ 2>&1
rm -rf $R/cache-s; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
