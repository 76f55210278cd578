#!/bin/bash
# Tenth session, for the next one: (1) ncu's source counts of kernel 9 compiled for two terms on
# the M = 2 shape S2 (device-sass.sh's steps; instructions per output after the compiled terms);
# (2) pedigree50's GPU-sized search rate now that its compute is 0.37 s (1.02 s when 1.6e11 was
# measured): KINFER_SEARCH_GPU_RATE 1.6e11 (the default), 2.4e11, 3.2e11, interleaved, three
# rounds, 60G, cold (measure.py: --order-cache none).
# Bundle: bench/e2e/bundle.sh build .dev-next SHARED_UAI (bench/gpu kept), sent as a .tgz
. "$(dirname "$0")/lib.sh"
e2e_begin next
timeout 200 ncu --section SourceCounters --section InstructionStats -k regex:lean9_kernel -c 1 -o $R/r2 \
  $B/run bench/gpu/bucket_bench --shape $S2 --no-f32 --cpu-runs 1 --repeats 1 --out $R/s.tsv > $R/ncu.txt 2>&1; echo "ncu rc=$?"
ncu -i $R/r2.ncu-rep --page source --csv --print-source sass > $R/sass2.csv 2> $R/sass2.err; echo "source page rc=$? $(wc -l < $R/sass2.csv) lines"
ncu -i $R/r2.ncu-rep --page details --print-details all > $R/details.txt 2>&1
grep -E "lean9|Duration|Executed Ipc|Issue Slots|Memory Throughput" $R/details.txt | head -12
rm -f $R/r2.ncu-rep
for i in 1 2 3; do
  for rate in 1.6e11 2.4e11 3.2e11; do
    sleep 2
    KINFER_SEARCH_GPU_RATE=$rate M --out "$R/p50-$rate.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  done
done
for rate in 1.6e11 2.4e11 3.2e11; do echo "== $rate"; cut -f1-5,17 $R/p50-$rate.tsv; done
tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
