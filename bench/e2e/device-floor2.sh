#!/bin/bash
# Fourteenth session, second call: floors 2, 3 and 4 (device-floor.sh found 4 better on
# linkage_12/13/17/18, worse on linkage_14), four cold rounds of the linkage networks, then the
# back-to-back round with pedigree50. Bundle: bench/e2e/bundle.sh build .dev-floor SHARED_UAI.
FLOOR_NAME=floor2 FLOORS="2 3 4" ROUNDS=4 \
  COLD_NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18" \
  exec bash "$(dirname "$0")/device-floor.sh"
