#!/bin/bash
# Twelfth session (split2: 512, 1024 and 4096 terms a lane, after 128-32 lost in device-split.sh;
# linkage_13's buckets from 2^29 states).
# Bundle: bench/e2e/bundle.sh build .dev-split SHARED_UAI (bench/gpu kept)
SPLIT_NAME=split2 SPLIT_TERMS="512 1024 4096" SPLIT_L13=29 exec bash "$(dirname "$0")/device-split.sh"
