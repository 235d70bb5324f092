# Several GPUs on one host, projected by the planner's closed form (experiment gpus_scaling:
# plan --gpus N on hgx-h100-8x): TFLOPS against N, and the scaling efficiency (tokens/s over
# N one-GPU ranks'), ours and our model of the official code's workers.
NAME = "gpus_scaling"
load "plots/common.gp"
load DATA.NAME.".gpi"
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set multiplot layout 1,2 title "Qwen2.5-7B, 158 or 4 rows per GPU, seq 1024, paper precision: N GPUs of one host\n{/*0.85 projected by the planner's closed form (plan --gpus N, planner/ranks.c) on hgx-h100-8x; the sim models one GPU.}"
  set xlabel "GPUs on one host"
  set logscale x 2
  set xrange [0.8:10]
  set xtics (1, 2, 4, 8)
  set key top left box opaque font ",10"
  set ylabel "TFLOP/s (6N convention), all GPUs"
  set yrange [0:*]
  if (N > 0) {
    plot for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:2 with linespoints pt pt(K[i]) ps ps(K[i]) dt dt(K[i]) lw 2 lc i title T[i] noenhanced
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
  set ylabel "scaling efficiency: tokens/s / (N x one GPU)"
  set yrange [0.7:1.12]
  set key bottom left box opaque font ",10"
  if (N > 0) {
    plot for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:3 with linespoints pt pt(K[i]) ps ps(K[i]) dt dt(K[i]) lw 2 lc i title T[i] noenhanced
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
  unset multiplot
}
