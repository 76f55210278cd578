# The shared steps of the device-e2e-*.sh calls (sourced; bundle.sh copies it beside them).
# e2e_begin NAME: the bundle $B (default .dev-NAME), results in $R=$OUT/NAME, the caches and
# profiles inside them, $k (kinfer), $D (networks), $t (trail.py), the machine's description.
set -u
e2e_begin() {
  NAME=$1; B=${B:-.dev-$NAME}; R=$OUT/$NAME; mkdir -p $R
  export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
  k="$B/run apps/kinfer"; D=$B/data/uai
  t="python3 $B/trail.py --kinfer \"$k\" --out $R/trail"
  nproc > $R/machine.txt
  nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv >> $R/machine.txt
}
# Three cold `pe --device auto` runs of each network, with their trail (-v).
e2e_cold3() {
  for n in "$@"; do
    eval $t "$n-cold1=\"pe $D/$n.uai --json --order-cache none\"" \
            "$n-cold2=\"pe $D/$n.uai --json --order-cache none\"" \
            "$n-cold3=\"pe $D/$n.uai --json --order-cache none\""
  done
}
M() { python3 "$B/measure.py" --kinfer "$k" --data "$D" "$@"; }
# The auto vs cpu table of the networks given, and pedigree50 with auto under 60G.
e2e_tables() {
  M --out "$R/after.tsv" --devices auto,cpu --timeout 40 --deadline 150 "$@"
  M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50
}
e2e_gpu_kernel_test() {
  ( cd $B && KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel.txt 2>&1
  echo "exit $?" >> $R/test_gpu_kernel.txt
}
e2e_check() {  # pe --check of each network
  for n in "$@"; do
    timeout 60 $k pe $D/$n.uai --check > $R/check-$n.txt 2>&1; echo "exit $?" >> $R/check-$n.txt
  done
}
# e2e_end COLUMNS: the verdicts and the table's first COLUMNS columns printed, the results packed.
e2e_end() {
  for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
  cut -f1-$1 $R/after.tsv; cut -f1-5 $R/pedigree50.tsv | tail -1
  rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
}
