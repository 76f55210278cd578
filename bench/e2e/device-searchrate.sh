#!/bin/bash
# The order search's rate in `pe --device auto` (the GPU opening beside it) against the same
# search with no GPU opening (--device cpu --order-time = the same work): linkage_11/17.
# Bundle: bench/e2e/bundle.sh build .dev-final17 SHARED_UAI (any bundle)
. "$(dirname "$0")/lib.sh"
e2e_begin searchrate
lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|Model name|MHz" | tee $R/lscpu.txt
for n in linkage_11 linkage_17; do
  w=$($k pe $D/$n.uai --json --order-cache none -v 2>&1 | grep -o "search [0-9.]* s, [0-9.]* nominal" | head -1 | awk '{print $4}')
  echo "$n work $w"
  for i in 1 2 3; do
    a=$($k pe $D/$n.uai --json --order-cache none -v 2>&1 | grep -o "search [0-9.]* s, [0-9.]* nominal")
    c=$($k pe $D/$n.uai --json --order-cache none --device cpu --order-time $w -v 2>&1 | grep -o "search [0-9.]* s, [0-9.]* nominal")
    c2=$($k pe $D/$n.uai --json --order-cache none --device cpu --order-time $w --threads 15 -v 2>&1 | grep -o "search [0-9.]* s, [0-9.]* nominal")
    echo "$n auto: $a | cpu: $c | cpu 15 threads: $c2"
  done
done | tee $R/rates.txt
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
