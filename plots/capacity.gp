# Largest trainable model vs host memory, megatrain vs zero3 (megatrain plan feasibility).
NAME = "capacity"
load "plots/common.gp"
load DATA.NAME.".gpi"
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set title "Largest trainable model vs host memory (projected: megatrain plan, H200 141 GB GPU, batch 1, seq 1024, paper precision)\n{/*0.85 points/steps: largest model shape in experiments/models that fits; thin lines: usable host memory / plan bytes per parameter}"
  set xlabel "host memory (GB)"
  set ylabel "parameters (billions)"
  set logscale x 2
  set xtics (64, 128, 256, 512, 1024, 1536)
  set xrange [56:1800]
  set yrange [0:*]
  set key top left
  if (N > 0) {
    plot for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:2 with steps lw 2 lc i notitle, \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:2 with points pt pt(K[i]) ps 1.6 lc i title T[i] noenhanced, \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:4 with lines lw 1 dt 3 lc i title "bound: ".T[i]
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
