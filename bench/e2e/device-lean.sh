#!/bin/bash
# Fifth session, call 2 (kernel 7 candidate: one-lane plain plans, M < 32 and <= 3 varying
# inputs, untiled in a kernel compiled for one lane at 4 blocks of 256 per SM; KINFER_GPU_LEAN=1):
# GPU kernel test (it runs the lean setting too), every bucket >= 2^27 states of linkage_11/17 and
# 45 random ones under three configurations in one process (main = the defaults, lean, notile =
# KINFER_GPU_TILES=0), then warm runs side by side (lean off / on alternating, three rounds).
# Bundle: bench/e2e/bundle.sh build .dev-lean SHARED_UAI (keep bench/gpu/bucket_bench)
. "$(dirname "$0")/lib.sh"
e2e_begin lean
e2e_gpu_kernel_test
CFG="--config main --config lean:KINFER_GPU_LEAN=1 --config notile:KINFER_GPU_TILES=0"
for n in linkage_17 linkage_11; do
  timeout 120 $B/run bench/gpu/bucket_bench --network $D/$n.uai --min-log2 27 --threads 16 --repeats 5 \
    --cpu-runs 1 --no-f32 $CFG --out $R/$n.tsv > $R/bench-$n.log 2>&1
  echo "buckets $n rc=$?"
done
timeout 120 $B/run bench/gpu/bucket_bench --random 45 --min-log2 22 --max-log2 28 --threads 16 --repeats 5 \
  --cpu-runs 1 --no-f32 $CFG --out $R/random.tsv > $R/bench-random.log 2>&1
echo "buckets random rc=$?"
python3 - $R <<'PY'
import csv, sys, os
R = sys.argv[1]
for name in ("linkage_17", "linkage_11", "random"):
    rows = {}
    for cfg in ("main", "lean", "notile"):
        p = f"{R}/{cfg}_{name}.tsv"
        if not os.path.exists(p): continue
        for r in csv.DictReader(open(p), delimiter="\t"):
            rows.setdefault((r["source"], r["bucket"]), {})[cfg] = r
    print(f"== {name}: bucket M n_in | plain ms main/lean/notile | cached | auto main/lean | roof_ms")
    tot = {"main": 0.0, "lean": 0.0}
    for k, v in rows.items():
        if "main" not in v or "lean" not in v: continue
        m = v["main"]
        if int(m["M"]) >= 32: continue
        f = lambda c, col: float(v[c][col]) if c in v else float("nan")
        tot["main"] += f("main", "t_auto_ms"); tot["lean"] += f("lean", "t_auto_ms")
        print(f'{k[1]:>5} {m["M"]:>3} {m["n_in"]} | {f("main","t_plain_ms"):.3f} {f("lean","t_plain_ms"):.3f} {f("notile","t_plain_ms"):.3f} | {f("main","t_cached_ms"):.3f} | {f("main","t_auto_ms"):.3f} {f("lean","t_auto_ms"):.3f} | {f("main","roof_ms"):.3f} diff {max(f("main","max_rel_diff"), f("lean","max_rel_diff")):.1e}')
    print("summed auto ms (M < 32):", tot)
PY
for i in 1 2 3; do
  M --warm --out $R/warm-off-$i.tsv --devices auto --timeout 30 --deadline 60 linkage_11 linkage_17 linkage_12
  KINFER_GPU_LEAN=1 M --warm --out $R/warm-on-$i.tsv --devices auto --timeout 30 --deadline 60 \
    linkage_11 linkage_17 linkage_12
done
for f in $R/warm-*.tsv; do echo "$(basename $f) $(cut -f1,3,5 $f | tail -n +2 | tr '\t\n' '  ')"; done
echo "kinfer processes left (zombies included): $(ps -eo comm | grep -cx kinfer || true)"
for f in $R/*.txt; do echo "$f: $(grep -E 'passed|PASSED|FAILED|failed|exit|one-lane' $f | tail -3 | tr '\n' ' ')"; done
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
