# Predicted vs measured step time on the same configuration.
NAME = "predicted"
load "plots/common.gp"
load DATA.NAME.".gpi"
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set title "Predicted vs measured step time (same model, system, batch, sequence length)\n{/*0.85 triangles: depth extrapolation vs the full-depth measurement (bars: its held-out error band); squares: sim vs a measured GPU run}"
  set xlabel "measured step time (ms)"
  set ylabel "predicted step time (ms)"
  set logscale xy
  set key top left box opaque font ",10"   # the empty corner above the diagonal (points sit on or below it)
  if (N > 0) {
    stats DATA.NAME.".tsv" using 1 nooutput
    lo = STATS_min; hi = STATS_max
    stats DATA.NAME.".tsv" using 4 nooutput
    lo = (STATS_min < lo ? STATS_min : lo)
    stats DATA.NAME.".tsv" using 5 nooutput
    lo = (lo > 0 ? lo : 1) / 1.5; hi = (STATS_max > hi ? STATS_max : hi) * 1.5
    if (hi / lo < 20) { unset logscale xy }   # within a decade log axes would show no tick labels
    set xrange [lo:hi]
    set yrange [lo:hi]
    set samples 200
    plot x with lines ls 100 title "predicted = measured", \
         x*1.1 with lines lc rgb "#bbbbbb" dt 2 title "±10%", x/1.1 with lines lc rgb "#bbbbbb" dt 2 notitle, \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:2:4:5 with yerrorbars pt pt(K[i]) ps 1.8 lc i title T[i] noenhanced
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
