#!/bin/bash
# Ninth session, call 1. (a) Kernel 9's first chunk by a tournament (the largest term's exp
# skipped): the kernel test, pe --check linkage_11/17, bucket 89's and 44's shapes and
# linkage_17's large buckets (k9 against kernel 8 in the same process), pedigree50's slices
# (timelines; 94.5-95.4 ms in the seventh session). (b) The CPU-sized order search's stopping
# rule: `pe --device cpu` of linkage_11/12/13/17, seeds 1-3, under (CPU rate, --order-time)
# = (5e7, 10) (today's default), (5e7, 40), (1e8, 40), (2e8, 40); wall, search and compute.
# Bundle: bench/e2e/bundle.sh build .dev-cpusearch SHARED_UAI (bench/gpu kept)
. "$(dirname "$0")/lib.sh"
e2e_begin cpusearch
e2e_gpu_kernel_test; tail -3 $R/test_gpu_kernel.txt; grep -E 'kernel 9:' $R/test_gpu_kernel.txt | head -4
e2e_check linkage_11 linkage_17
bb="$B/run bench/gpu/bucket_bench"
for s in 89:$S89 44:$S44; do
  timeout 100 $bb --config k9 --config k8:KINFER_GPU_LEAN_CHUNKS=0 --shape ${s#*:} --no-f32 --cpu-runs 1 --repeats 7 --out $R/shape${s%%:*}.tsv > $R/shape${s%%:*}.txt 2>&1; echo "shape ${s%%:*} rc=$?"
  grep -E '^k[89] ' $R/shape${s%%:*}.txt
done
timeout 100 $bb --config k9 --config k8:KINFER_GPU_LEAN_CHUNKS=0 --network $D/linkage_17.uai --min-log2 28 --no-f32 --cpu-runs 1 --repeats 5 --out $R/l17.tsv > $R/l17.txt 2>&1; echo "l17 buckets rc=$?"
for i in 0 1; do e2e_pe_timeline p50-$i pedigree50; done
# (b) the CPU search sweep
printf 'network\tseed\trate\tbudget\twall_s\torder_s\tcompute_s\twork\tlog2_total\tstopped\tlog10_pr\n' > $R/cpusearch.tsv
for n in linkage_17 linkage_13 linkage_12 linkage_11; do
  for seed in 1 2 3; do
    for cfg in 5e7:10 5e7:40 1e8:40 2e8:40; do
      rate=${cfg%%:*}; bud=${cfg#*:}
      s0=$(date +%s.%N)
      KINFER_SEARCH_CPU_RATE=$rate timeout 60 $k pe $D/$n.uai --device cpu --seed $seed --order-time $bud --order-cache none --json > $R/c.json 2>/dev/null
      rc=$?; s1=$(date +%s.%N)
      python3 - "$n" "$seed" "$rate" "$bud" "$s0" "$s1" "$rc" "$R/c.json" >> $R/cpusearch.tsv <<'PY'
import json, sys
n, seed, rate, bud, s0, s1, rc, f = sys.argv[1:]
try:
    d = json.load(open(f)); o = d.get('order', {}); t = d.get('timings', {})
    print('\t'.join(str(x) for x in [n, seed, rate, bud, round(float(s1) - float(s0), 3), round(o.get('seconds', 0), 3), round(t.get('compute', 0), 3), round(o.get('work', 0), 2), round(o.get('log2_total_state', 0), 3), o.get('stopped_by'), d.get('log10_pr')]))
except Exception as e:
    print(f'{n}\t{seed}\t{rate}\t{bud}\t{round(float(s1)-float(s0),3)}\trc={rc}\t{e}')
PY
      tail -1 $R/cpusearch.tsv
    done
  done
done
rm -f $R/c.json
rm -rf $R/cache; tar -C $OUT -czf $OUT/$NAME.tgz $NAME && rm -rf $R
