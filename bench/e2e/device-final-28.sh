#!/bin/bash
# Tenth session, CUDA_DEVICE_MAX_CONNECTIONS=1 set by kinfer's main() (one hardware work queue:
# the context's creation ~0.07 s shorter, device-connections.sh). (1) A/B of cold `pe --device
# auto`, each after 3 s idle, this build as it is against CUDA_DEVICE_MAX_CONNECTIONS=8 (the
# driver's default, which kinfer keeps when the user sets it), three rounds, and pedigree50
# (60G) two rounds; GPU timelines of linkage_11 and pedigree50 both ways (the executor's streams
# on one queue). (2) The closing table as device-final-27 (cpu then auto, pedigree50 under 60G
# three times, 100G, the default limit, the four large ones back to back at the end).
# Bundle: bench/e2e/bundle.sh build .dev-final28 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final28
for i in 1 2 3; do
  for c in one eight; do
    for n in linkage_11 linkage_17 linkage_13 linkage_12; do
      sleep 3
      if [ $c = one ]; then M --out "$R/ab-one.tsv" --devices auto --timeout 40 --deadline 60 $n > /dev/null 2>&1
      else CUDA_DEVICE_MAX_CONNECTIONS=8 M --out "$R/ab-eight.tsv" --devices auto --timeout 40 --deadline 60 $n > /dev/null 2>&1; fi
    done
  done
done
for i in 1 2; do
  sleep 3; M --out "$R/ab-one-p50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
  sleep 3; CUDA_DEVICE_MAX_CONNECTIONS=8 M --out "$R/ab-eight-p50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 > /dev/null 2>&1
done
for n in linkage_11 pedigree50; do
  e2e_pe_timeline $n-one $n
  e2e_pe_timeline $n-eight $n CUDA_DEVICE_MAX_CONNECTIONS=8
done
NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 Pedigree_11"
M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 120 $NETS
e2e_p50_rows
M --out "$R/after.tsv" --devices auto --timeout 40 --deadline 60 linkage_17 linkage_13 linkage_12 linkage_11
e2e_left
for f in ab-one ab-eight ab-one-p50 ab-eight-p50 after pedigree50 p50-100G p50-default; do echo "== $f"; cut -f1-6,9,10 $R/$f.tsv; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
