#!/bin/bash
# Fifth session, call 7: the runner reading the GPU's profile while its context is made; the
# trail (-v) of three cold `pe --device auto` runs of linkage_17/11/12/13 (where the time
# between the device's opening and the first kernel goes), --check, and the cold table.
# Bundle: bench/e2e/bundle.sh build .dev-final13 SHARED_UAI
. "$(dirname "$0")/lib.sh"
e2e_begin final13
e2e_check linkage_17
e2e_cold3 linkage_17 linkage_11 linkage_12 linkage_13
e2e_tables linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 Pedigree_11
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
e2e_end 12
