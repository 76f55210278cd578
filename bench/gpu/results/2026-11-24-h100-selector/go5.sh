#!/usr/bin/env bash
# device call 5 (selector data, kernel 5 defaults): every bucket >= 2^24 states of six linkage
# networks and 60 random buckets of 2^22-2^27 states, plain (tiled where the planner tiles),
# cached and the selector's choice timed per bucket (bucket_bench), to refit the selector.
# usage (on the GPU machine, from the bundle): [NETS="..."] bash go5.sh OUT
# (call 5 brought back only 8 of its files, linkage_11/12/13/14: call 6 ran NETS="linkage_17
# linkage_18" and the random buckets again, packed)
cd "$(dirname "$0")"
D=$(pwd)
mkdir -p "$1"
export KINFER_DATA="$D/data" KINFER_ORDER_CACHE="$1/orders"
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$1/summary.txt"; }
for net in ${NETS:-linkage_11 linkage_12 linkage_13 linkage_17 linkage_18 linkage_14}; do
  f=data/uai/$net.uai; [[ -e $f ]] || f=$f.gz
  timeout 110 new/run bench/gpu/bucket_bench --network "$D/$f" --min-log2 24 --threads 16 --repeats 3 \
    --cpu-runs 1 --no-f32 --out "$1/$net.tsv" > "$1/$net.log" 2>&1
  echo "[+${SECONDS}s] $net rc=$? $(($(wc -l < "$1/$net.tsv") - 1)) buckets" | tee -a "$1/summary.txt"
done
timeout 150 new/run bench/gpu/bucket_bench --random 60 --min-log2 22 --max-log2 27 --seed 11 --threads 16 \
  --repeats 3 --cpu-runs 1 --no-f32 --out "$1/random.tsv" > "$1/random.log" 2>&1
echo "[+${SECONDS}s] random rc=$? $(($(wc -l < "$1/random.tsv") - 1)) buckets" | tee -a "$1/summary.txt"
rm -rf "$1/orders"
# the device tool brings back few files: everything in one archive
tar -C "$1" -czf "$1.tgz" . && rm -rf "$1" && mkdir -p "$1" && mv "$1.tgz" "$1/all.tgz"
