# Plots of the GPU benchmark (paper 000 Fig. 5 / paper 001 Fig. 5 style) from the tables that
# summarize.py writes: gnuplot -e "dir='bench/gpu/results/run3'" bench/gpu/plot.gp
if (!exists("dir")) dir = "bench/gpu/results/run3"
set terminal pngcairo size 900,600 font ",11" noenhanced
set datafile separator "\t"
set key top left
set grid
set format x "%g"
set logscale x
set logscale y
set xlabel "bucket work (GFLOP, states x (inputs + 2))"
f = dir."/all_buckets.tsv"

set output dir."/perf_vs_size.png"
set title "Per-bucket speed: 16-core OpenMP CPU vs H200 kernels (double; float selected)"
set ylabel "GFLOP/s"
plot f skip 1 using 3:($3*1000/$4) with points pt 7 ps 0.5 lc rgb "#888888" title "CPU, 16 threads", \
     f skip 1 using 3:($3*1000/$5) with points pt 6 ps 0.6 lc rgb "#1f77b4" title "GPU plain (L1/L2)", \
     f skip 1 using 3:($6 == $6 ? $3*1000/$6 : 1/0) with points pt 4 ps 0.6 lc rgb "#d62728" title "GPU software cache", \
     f skip 1 using 3:($3*1000/$7) with points pt 7 ps 0.4 lc rgb "#2ca02c" title "GPU selected", \
     f skip 1 using 3:($3*1000/$8) with points pt 1 ps 0.5 lc rgb "#9467bd" title "GPU selected, float"

set output dir."/speedup_vs_cpu.png"
set title "Selected GPU kernel over the 16-core CPU kernel, per bucket"
set ylabel "speedup (CPU time / GPU time)"
plot f skip 1 using 3:($4/$7) with points pt 7 ps 0.5 lc rgb "#2ca02c" title "double", \
     f skip 1 using 3:($4/$8) with points pt 1 ps 0.5 lc rgb "#9467bd" title "float", \
     20 with lines dt 2 lc rgb "black" title "20x"

set output dir."/roofline_fraction.png"
set title "Fraction of the roofline bound (measured bandwidth and exp-sum rate)"
set ylabel "roofline time / measured time"
unset logscale y
set yrange [0:1]
plot f skip 1 using 3:($9/$7) with points pt 7 ps 0.5 lc rgb "#2ca02c" title "selected (double)", \
     0.5 with lines dt 2 lc rgb "black" title "half the bound"

set output dir."/cache_vs_plain.png"
set title "Software cache vs plain loads through L1/L2: time ratio per bucket"
set xlabel "summed configurations per output (M)"
set ylabel "plain time / cached time (> 1: the cache wins)"
set logscale y
set autoscale y
plot f skip 1 using 11:(strcol(10) eq "cached" && $6 == $6 ? $5/$6 : 1/0) with points pt 7 ps 0.6 lc rgb "#d62728" title "selector chose cached", \
     f skip 1 using 11:(strcol(10) eq "plain" && $6 == $6 ? $5/$6 : 1/0) with points pt 6 ps 0.6 lc rgb "#1f77b4" title "selector chose plain", \
     1 with lines dt 2 lc rgb "black" notitle

set output dir."/end_to_end.png"
set title "kinfer pe end to end: 16-core CPU vs GPU (H200), median seconds"
unset logscale x
set format x "%g"
set logscale y
set autoscale y
set xlabel ""
set ylabel "seconds"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -35
g = dir."/e2e_summary.tsv"
plot g skip 1 using 2:xtic(1) title "CPU, 16 threads" lc rgb "#888888", \
     '' skip 1 using 3 title "GPU (incl. ~0.2 s device start)" lc rgb "#2ca02c", \
     '' skip 1 using 5 title "GPU without device start" lc rgb "#98df8a"
