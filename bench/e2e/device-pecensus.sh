#!/bin/bash
# Twelfth session: the roofline census of the buckets pe really runs (the census so far timed
# bucket_bench's own orders). pe --device auto of linkage_11/12/13/17/18 with KINFER_GPU_SHAPES
# (the GPU buckets as the kernels take them) and KINFER_GPU_TIMELINE; each bucket whose kernel
# took >= 0.5 ms in pe is timed alone by bucket_bench --shape (random inputs, five repeats),
# source = the network, bucket = pe's bucket number; the census of all of them.
# Bundle: bench/e2e/bundle.sh build .dev-pecensus SHARED_UAI (bench/gpu kept, roofline_census.py
# beside the scripts)
. "$(dirname "$0")/lib.sh"
# CENSUS_NAME: the results' name (default pecensus; the thirteenth session's call ran as
# pecensus2, linkage_18 first, its files left unpacked under $OUT: the device returns at most
# a few dozen files of a call, and the tables come from census.txt).
e2e_begin ${CENSUS_NAME:-pecensus}
for n in linkage_17 linkage_11 linkage_12 linkage_13 linkage_18; do
  KINFER_GPU_SHAPES=$R/$n-shapes.txt KINFER_GPU_TIMELINE=$R/$n-timeline.tsv timeout 60 $k pe $D/$n.uai --json --order-cache none > $R/$n.json 2> $R/$n.log
  echo "$n rc=$? $(grep -o '"log10_pr": [-0-9.e]*' $R/$n.json)"
  python3 - $R/$n-shapes.txt $R/$n-timeline.tsv > $R/$n-picked.txt <<'PY'
import csv, sys
spec, b = {}, None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("# bucket "):
        b = line.split()[2].rstrip(":")
    elif line:
        spec[b] = line
for r in csv.DictReader(open(sys.argv[2]), delimiter="\t"):
    ms = 1e3 * (float(r["gpu_end"]) - float(r["gpu_begin"]))
    if ms >= 0.5 and r["bucket"] in spec:
        print(r["bucket"], round(ms, 2), spec[r["bucket"]])
PY
  while read -r b ms s; do
    timeout 120 $B/run bench/gpu/bucket_bench --shape "$s" --threads 16 --repeats 5 --cpu-runs 1 --no-f32 \
      --out $R/$n-$b.tsv > $R/$n-$b.log 2>&1
    echo "$n bucket $b (pe kernel $ms ms) rc=$?"
    awk -F'\t' -v OFS='\t' -v n=$n -v b=$b 'NR > 1 { $1 = n; $2 = b } { print }' $R/$n-$b.tsv > $R/$n-$b.t && mv $R/$n-$b.t $R/$n-$b.tsv
  done < $R/$n-picked.txt
done
python3 $B/roofline_census.py $R/linkage_*-[0-9]*.tsv > $R/census.txt 2>&1; cat $R/census.txt
python3 $B/roofline_census.py --min-gflop 0.3 $R/linkage_*-[0-9]*.tsv > $R/census-0.3.txt 2>&1; tail -3 $R/census-0.3.txt
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
