# The shared steps of the device-e2e-*.sh calls (sourced; bundle.sh copies it beside them).
# e2e_begin NAME: the bundle $B (default: the calling script's folder when it holds the bundle's
# `run`, else .dev-NAME), results in $R=$OUT/NAME, the caches and
# profiles inside them, $k (kinfer), $D (networks), $t (trail.py), the machine's description.
set -u
e2e_begin() {
  # the bundle: $B, else the folder the calling script runs from when it is a bundle (bundle.sh
  # copies the scripts into it), else .dev-NAME
  NAME=$1; R=$OUT/$NAME; mkdir -p $R
  if [ -z "${B:-}" ]; then
    if [ -x "$(dirname "$0")/run" ]; then B=$(dirname "$0"); else B=.dev-$NAME; fi
  fi
  export XDG_CACHE_HOME=$R/cache KINFER_PROFILES=$PWD/$B/data/profiles KINFER_DATA=$PWD/data
  k="$B/run apps/kinfer"; D=$B/data/uai
  t="python3 $B/trail.py --kinfer \"$k\" --out $R/trail"
  nproc > $R/machine.txt
  nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv >> $R/machine.txt
}
# pedigree50's largest buckets (bucket_bench --print-shapes 8 --max-memory 60e9, its 4 s order:
# buckets 44, 89, 141) as bucket_bench --shape specs, their first cardinality 6 -> 2 so that the
# benchmark's host copies stay small (docs/perf-notes.md "Kernel 9").
S44='2,2,5,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,4/1/0,1,2,3,4,5,9,10,12,13,14,15,18/1,6,7,8,11,16,17,18'
S89='2,2,5,2,5,6,2,2,2,3,6,2,3,5,3,2,5,3,3/1/0,1,2,3,4,5,6,7,8,10,11,12,13,14,15,16,17,18/0,2,4,5,7,9,10,11,13,14,15,16,18'
S141='2,3,2,5,2,5,6,2,2,2,3,6,2,3,5,3,2,5,3/1/0,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18/0,1,3,5,6,9,11,12,14,15,16,17,18'
# An M = 2 one-lane bucket (the shape of linkage_11 384 and linkage_17 263, 2^28 outputs): 28
# binary output variables and a binary summed one, a 2^27-entry input and a small one.
S2='2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2/1/0,1,2,4,5,6,7,8,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28/3,9,12,20,28'
# Pedigree50's shapes with other summed variables (tenth session, device-fixed*.sh): S4M is S44
# with its summed variable of 4 values as two binary ones, the first input holding only the
# first (not direct: the mixed M = 4 family); S6/S8 shape 89 with a summed variable of 6 or 8
# values and one output variable 5 -> 2; S6M/S8M S4M's two summed variables of 2 x 3 and 2 x 4.
S4M='2,2,5,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,2,2/2/0,1,2,3,4,5,9,10,12,13,14,15,18/1,6,7,8,11,16,17,18,19'
I89='0,1,2,3,4,5,6,7,8,10,11,12,13,14,15,16,17,18/0,2,4,5,7,9,10,11,13,14,15,16,18'
IM='0,1,2,3,4,5,9,10,12,13,14,15,18/1,6,7,8,11,16,17,18,19'
S6="2,2,2,2,5,6,2,2,2,3,6,2,3,5,3,2,5,3,6/1/$I89"
S8="2,2,2,2,5,6,2,2,2,3,6,2,3,5,3,2,5,3,8/1/$I89"
S6M="2,2,2,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,2,3/2/$IM"
S8M="2,2,2,2,5,6,2,2,2,6,2,3,5,3,2,5,3,3,2,4/2/$IM"
# e2e_shapes_ab CONFIG_A CONFIG_B LABEL:SPEC...: each shape under both bucket_bench configs
# (NAME[:VAR=VAL]) in one process, its rows printed; results $R/shapeLABEL.{tsv,txt}.
e2e_shapes_ab() {
  local a=$1 b=$2 s; shift 2
  for s in "$@"; do
    timeout 100 $B/run bench/gpu/bucket_bench --config $a --config $b --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 7 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
    grep -E "^(${a%%:*}|${b%%:*}) " $R/shape${s%%:*}.txt
  done
}
# e2e_timelines_ab ROUNDS NAME_A NAME_B VAR=VAL NETWORK...: e2e_pe_timeline of each network as
# it is (NAME_A) and under VAR=VAL (NAME_B), ROUNDS rounds ($R/NETWORK-NAME-ROUND.*).
e2e_timelines_ab() {
  local rounds=$1 a=$2 b=$3 env=$4 i n; shift 4
  for ((i = 0; i < rounds; ++i)); do
    for n in "$@"; do
      e2e_pe_timeline $n-$a-$i $n
      e2e_pe_timeline $n-$b-$i $n $env
    done
  done
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
# pedigree50 cold under --max-memory 60G (three runs, $R/pedigree50.tsv), 100G (the issue's
# command, $R/p50-100G.tsv) and the default limit ($R/p50-default.tsv).
e2e_p50_rows() {
  M --out "$R/pedigree50.tsv" --devices auto --timeout 60 --deadline 70 --extra "--max-memory 60G" pedigree50 pedigree50 pedigree50
  M --out "$R/p50-100G.tsv" --devices auto --timeout 60 --deadline 70 pedigree50
  M --out "$R/p50-default.tsv" --devices auto --timeout 60 --deadline 70 --extra "" pedigree50
}
e2e_left() { echo "kinfer processes left: $(ps -eo comm | grep -cx kinfer || true)"; }
# Every shared network but pedigree50 (the eleventh session's closing tables).
E2E_SHARED_NETS="linkage_11 linkage_12 linkage_13 linkage_17 linkage_14 linkage_18 linkage_16 linkage_21 linkage_24
Pedigree_11 Pedigree_12 Pedigree_13 pedigree1 Alchemy_11 CSP_12 DBN_11 Grids_11 ObjectDetection_74
Promedus_24 Segmentation_12 grid10x10.f10"
# e2e_closing NETWORK...: each network cold under the 16-core cpu then auto ($R/after.tsv,
# --max-memory 100G), pedigree50's rows, every auto run again at the end ($R/again.tsv), the
# kinfer processes left, the tables printed.
e2e_closing() {
  M --out "$R/after.tsv" --devices cpu,auto --timeout 40 --deadline 200 "$@"
  e2e_p50_rows
  M --out "$R/again.tsv" --devices auto --timeout 40 --deadline 100 "$@"
  e2e_left
  for f in after pedigree50 p50-100G p50-default again; do echo "== $f"; cut -f1-5,8,9,17 $R/$f.tsv; done
}
e2e_gpu_kernel_test() {
  ( cd $B && KINFER_GPU_TEST_SCALE=0.03 timeout 120 ./run tests/test_gpu_kernel ) > $R/test_gpu_kernel.txt 2>&1
  echo "exit $?" >> $R/test_gpu_kernel.txt
}
# e2e_gpu_kernel_case CASE FILE: one case of the kernel test at full scale into $R/FILE, its
# kernel 9 summary printed.
e2e_gpu_kernel_case() {
  ( cd $B && KINFER_GPU_TEST_SCALE=1 timeout 150 ./run tests/test_gpu_kernel "$1" ) > $R/$2 2>&1
  echo "full-scale $1 exit $?"; grep -E 'kernel 9' $R/$2
}
e2e_check() {  # pe --check of each network, its verdict printed
  for n in "$@"; do
    timeout 60 $k pe $D/$n.uai --check > $R/check-$n.txt 2>&1; echo "exit $?" >> $R/check-$n.txt
    echo "check $n: $(tail -2 $R/check-$n.txt | tr '\n' ' ' | cut -c1-160)"
  done
}
# e2e_calibrate PROFILE: `kinfer calibrate` (45 s, linkage_11/17's buckets in the sweep) into
# $R/PROFILE, the old one kept as $R/PROFILE-old.json, the new one installed as the bundle's
# shipped profile for the steps that follow.
e2e_calibrate() {
  local p=$1
  cp $B/data/profiles/$p.json $R/$p-old.json
  timeout 150 $k calibrate --seconds 45 --network $D/linkage_11.uai --network $D/linkage_17.uai \
    -o $R/$p.json > $R/calibrate.txt 2> $R/calibrate.log
  echo "calibrate rc=$? $(tail -8 $R/calibrate.txt | tr '\n' ' ')"
  [ -s $R/$p.json ] && cp $R/$p.json $B/data/profiles/$p.json
}
# e2e_bucket_logs PROFILE NETWORK...: each bucket's predicted and measured kernel time
# (schedule-compare --bucket-log with the tree and summary, for bench/scheduler/repredict).
e2e_bucket_logs() {
  local p=$1 n
  shift
  for n in "$@"; do
    timeout 100 $k schedule-compare $D/$n.uai --seed 1 --order-time 1.5 --order-cache none --repeat 1 \
      --profile $B/data/profiles/$p.json --save-tree $R/$n.tree.json --bucket-log $R/$n.buckets.tsv \
      --json > $R/$n.json 2> $R/$n-schedule.log
    echo "schedule-compare $n rc=$?"
  done
}
# The auto rows again with the helper exit (KINFER_EXIT=fast), and the kinfer processes left.
e2e_helper_rows() {
  KINFER_EXIT=fast M --out "$R/helper.tsv" --devices auto --timeout 40 --deadline 60 "$@"
  cut -f1-5 $R/helper.tsv
  echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
}
# e2e_pe_timeline NAME NETWORK [VAR=VALUE...]: one `pe NETWORK --max-memory 60G -v` under those
# variables with KINFER_GPU_TIMELINE, its JSON, log and timeline kept as $R/NAME.*, and a line
# with its answer and the timeline's summary (GPU busy time).
e2e_pe_timeline() {
  local name=$1 n=$2; shift 2
  env "$@" KINFER_GPU_TIMELINE=$R/$name.tsv timeout 60 $k pe $D/$n.uai --json --max-memory 60G -v > $R/$name.json 2> $R/$name.log
  echo "$name rc=$? $(grep -o '"log10_pr": [-0-9.e]*' $R/$name.json) $(python3 $B/timeline.py $R/$name.tsv --gap 5 2>/dev/null | head -1 | cut -d: -f2 | cut -c1-70)"
}
# e2e_end COLUMNS: the verdicts and the table's first COLUMNS columns printed, the results packed.
e2e_end() {
  for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit' $f | tail -2 | tr '\n' ' ')"; done
  cut -f1-$1 $R/after.tsv; cut -f1-5 $R/pedigree50.tsv | tail -1
  rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
}
