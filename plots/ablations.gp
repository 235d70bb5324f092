# Ablations of the megatrain schedule: step time relative to the baseline (C5: bind=copy).
NAME = "ablations"
load "plots/common.gp"
load DATA.NAME.".gpi"
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set title "Ablations: step time relative to the default megatrain schedule (2 weight buffers, K=1, pointer bind, overlapped optimizer)\n{/*0.85 lower is better; bars: the row's range (timed steps' min-max). Projected by the sim at GPU scale, or measured on CPU (a machinery check: copies are memcpy)}"
  set ylabel "step time / baseline step time"
  set xtics rotate by -30 noenhanced   # the variants' names, from the data (bind=copy is C5)
  set xrange [-0.5:*]
  set yrange [0:*]
  set key top left
  set boxwidth 0.35
  set style fill solid 0.6
  if (N > 0) {
    plot 1 with lines ls 100 notitle, \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using ($1 + (i - 1.5) * 0.36):2 with boxes lc i title T[i] noenhanced, \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:(-1):xtic(3) with points notitle, \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using ($1 + (i - 1.5) * 0.36):2:5:6 with yerrorbars lc rgb "#333333" pt 7 ps 0 notitle
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
