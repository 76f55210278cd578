#!/bin/bash
# Eleventh session: the kernels' large launch-plan tables in transparent huge pages
# (gpu/policy.cpp zeroed_table; KINFER_HUGE_TABLES=0: 4 kB pages as before). (1) The build time
# of one 2^29-output plan (16.8 MB of tables) in fresh processes, twice a process, alternating
# (bucket_bench --plans --shape: no GPU); (2) pe timelines of linkage_11/17/12 both ways, three
# rounds (the trail's "kernel plans prepared in"); (3) cold pe --device auto both ways.
# Bundle: bench/e2e/bundle.sh build .dev-huge SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin huge
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag >> $R/machine.txt 2>&1
SH='2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2/1/0,1,2,4,5,6,7,8,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29/3,9,12,20,28/1,5,29'
for i in 1 2 3 4 5 6; do
  $B/run bench/gpu/bucket_bench --plans --shape $SH --shape $SH --out $R/h.tsv
  KINFER_HUGE_TABLES=0 $B/run bench/gpu/bucket_bench --plans --shape $SH --shape $SH --out $R/s.tsv
  echo "build ms: huge $(cut -f19 $R/h.tsv | tail -2 | tr '\n' ' ') 4k $(cut -f19 $R/s.tsv | tail -2 | tr '\n' ' ')"
done
grep -E "thp_fault_alloc|thp_fault_fallback |compact_stall" /proc/vmstat
e2e_timelines_ab 3 huge small KINFER_HUGE_TABLES=0 linkage_11 linkage_17 linkage_12
for f in $R/linkage_*.log; do echo "$(basename $f): $(grep -o 'kernel plans prepared in [0-9.]* s' $f | head -1) $(grep -o 'built in [0-9.]* ms, 25.2 MB' $f | head -1)"; done
for i in 1 2 3; do
  M --out "$R/huge.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 > /dev/null 2>&1
  KINFER_HUGE_TABLES=0 M --out "$R/small.tsv" --devices auto --timeout 40 --deadline 60 linkage_11 linkage_17 > /dev/null 2>&1
done
for f in huge small; do echo "== $f"; cut -f1-5 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
