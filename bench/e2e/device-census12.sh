#!/bin/bash
# Eleventh session: the roofline census's rows this session changed, on the final build:
# linkage_17's buckets as the plan has them and as the executor runs them (--merge), and
# pedigree50's largest buckets at 60G (bucket_bench --print-shapes 12 --max-memory 60e9
# --order-time 1.31: the order pe finds), full size, which the census never held.
# Bundle: bench/e2e/bundle.sh build .dev-census12 SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin census12
timeout 150 $B/run bench/gpu/bucket_bench --network $D/linkage_17.uai --min-log2 26 --merge \
  --threads 16 --repeats 3 --cpu-runs 1 --no-f32 --out $R/linkage_17.tsv > $R/linkage_17.log 2>&1
echo "linkage_17 rc=$?"
ids=(209 203 104 202 90); i=0
for s in \
  '4,6,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3/6/1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18/0,4,13,14,15,16,17,18' \
  '6,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3,3/1/0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,18/0,1,2,4,6,7,8,9,10,11,13,17,18' \
  '6,5,3,2,6,2,2,5,6,2,5,5,2,2,2,3,3,3,3/1/0,1,2,4,6,7,8,9,10,11,12,15,18/0,1,3,4,5,7,8,12,13,14,16,17,18' \
  '6,5,3,6,2,5,6,2,5,5,2,3,3,2,2,2/3/0,2,3,4,6,7,10,13,14,15/1,5,8,9,11,12,13,14,15' \
  '6,5,3,6,2,5,6,2,5,5,3,3,2,2,3/2/1,5,13,14/0,2,3,4,6,7,8,9,10,11,12,13,14'; do
  timeout 120 $B/run bench/gpu/bucket_bench --shape $s --threads 16 --repeats 3 --cpu-runs 1 --no-f32 \
    --out $R/p50-$i.tsv > $R/p50-$i.log 2>&1
  echo "p50 shape ${ids[$i]} rc=$?"
  awk -F'\t' -v OFS='\t' -v b=${ids[$i]} 'NR > 1 { $1 = "pedigree50"; $2 = b } { print }' $R/p50-$i.tsv > $R/p50-$i.t && mv $R/p50-$i.t $R/p50-$i.tsv
  i=$((i + 1))
done
python3 $B/roofline_census.py $R/*.tsv > $R/census.txt 2>&1; cat $R/census.txt
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
