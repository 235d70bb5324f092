# C2: throughput vs batch, megatrain vs zero3 vs naive. Left: GPU scale (Qwen2.5-14B on
# GH200, projected; measured rows from the GPU machine when present). Right: the CPU
# machinery check (measured, small model: transfers are memcpy, not the claim).
NAME = "batch"
load "plots/common.gp"
W = 1500
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set multiplot layout 1,2 title "C2: throughput vs batch (seq 1024 GPU / 256 CPU, paper precision)  {/*0.85 TFLOPS = 6 N_{all} tokens / step time}"
  set logscale x 2
  set xlabel "batch (sequences per step)"
  set key bottom right box opaque font ",9"
  load DATA."batch_gpu.gpi"
  set title "GPU scale: Qwen2.5-14B on GH200 (open squares = projected by the sim backend)"
  set ylabel "TFLOP/s (6N convention)"
  set yrange [0:*]
  if (N > 0) {
    plot for [i=1:N] DATA."batch_gpu.tsv" index (i-1) using 1:2 with linespoints pt pt(K[i]) ps ps(K[i]) dt dt(K[i]) lw 2 lc i title T[i] noenhanced
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
  load DATA."batch_cpu.gpi"
  set title "CPU machinery check: measured, --backend cpu, not the claim\n{/*0.85 bars: min-max over the timed steps}"
  set ylabel "tokens/s"
  if (N > 0) {
    plot for [i=1:N] DATA."batch_cpu.tsv" index (i-1) using 1:3:5:6 with yerrorlines pt pt(K[i]) ps ps(K[i]) dt dt(K[i]) lw 2 lc i title T[i] noenhanced
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
  unset multiplot
}
