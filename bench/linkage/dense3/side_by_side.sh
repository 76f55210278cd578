#!/bin/bash
# The third round's before/after (RESULTS.md "Third round"): two kinfer binaries, alternating,
# the same commands, two rounds. Usage: side_by_side.sh DIR (DIR holds kinfer-main and
# kinfer-final, c250.ped/.dat and c40.ped/.dat from scripts/bench_linkage.py's part 4).
dir=${1:-.}
here=$(cd "$(dirname "$0")" && pwd)
cd "$dir" || exit 1
for round in 1 2; do
  for case in c250 c40; do
    if [ $case = c250 ]; then pos="-5:129.5:1"; else pos="-5:200:2"; fi
    for b in main final; do
      echo "== round $round $case $b $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
      /usr/bin/time -f "TIME %U user %S sys %e wall %M KB" ./kinfer-$b -v lod --ped $case.ped \
        --dat $case.dat --json --max-memory 4G --program linkmap --moving 1 --positions $pos \
        > fin-$case-$b-$round.json 2> fin-$case-$b-$round.err
      grep -E "chain on|TIME" fin-$case-$b-$round.err | sed 's/.*chain on/chain on/'
    done
    python3 "$here/compare_json.py" fin-$case-main-$round.json fin-$case-final-$round.json
  done
done
