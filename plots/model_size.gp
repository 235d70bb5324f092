# Throughput vs model size per system and hardware profile (experiments model_size, gpu_scale).
NAME = "model_size"
load "plots/common.gp"
load DATA.NAME.".gpi"
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set title "Training throughput vs model size (seq 1024, batch 16, paper precision: 12 B/param)\n{/*0.85 TFLOPS = 6 N_{all} tokens / step time. Open squares + dashed = projected (sim backend); filled = measured or extrapolated.}\n{/*0.85 A line stops where the next model no longer fits that machine (megatrain plan).}"
  set xlabel "model parameters N_{all} (billions)"
  set ylabel "TFLOP/s (6N convention)"
  set logscale x 2
  set xrange [5:160]
  set xtics (7, 8, 14, 32, 72, 110)
  set yrange [0:*]
  set key outside right top box opaque font ",10"   # inside, it covered the 110B point
  set xrange [5:300]
  if (N > 0) {
    plot for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:2 with linespoints pt pt(K[i]) ps ps(K[i]) dt dt(K[i]) lw 2 lc i title T[i] noenhanced
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
