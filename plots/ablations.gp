# Ablations of the megatrain schedule: step time relative to the baseline (C5: bind=copy).
NAME = "ablations"
load "plots/common.gp"
load DATA.NAME.".gpi"
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set title "Ablations: step time relative to the default megatrain schedule (2 weight buffers, K=1, pointer bind, overlapped optimizer)\n{/*0.85 lower is better; one bar colour per series (legend): projected by the sim backend at GPU scale, or measured on CPU (small model: copies are memcpy, a machinery check)}"
  set ylabel "step time / baseline step time"
  set xtics rotate by -30 ("baseline" 0, "1 buffer" 1, "naive schedule" 2, "3 buffers" 3, "ckpt K=2" 4, "ckpt K=4" 5, "bind=copy (C5)" 6, "serial optimizer" 7, "grad slabs 2" 8, "grad slabs 12" 9, "zero3" 10)
  set xrange [-0.5:10.5]
  set yrange [0:*]
  set key top left
  set boxwidth 0.35
  set style fill solid 0.6
  if (N > 0) {
    plot 1 with lines ls 100 notitle, \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using ($1 + (i - 1.5) * 0.36):2 with boxes lc i title T[i]
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
