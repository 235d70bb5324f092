# Where the sim's step differs from a measured one, span by span: per configuration that kept
# its trace, the costliest span kinds as milliseconds a step, measured beside the sim. Data:
# CDATA/spans.tsv + spans.gpi from harness/sweep/span_check.py --export results/sim_validation.json
# (reproduce.sh makes them beside the figure; `make sim-check` writes the validation file).
NAME = "spans"
load "plots/common.gp"
if (!exists("CDATA")) CDATA = OUT
F = CDATA.NAME.".tsv"
N = 0
if (system("test -f '".CDATA.NAME.".gpi' && echo 1") eq "1") { load CDATA.NAME.".gpi" }
H = (N > 1 ? 420 * N : 750)
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  if (N > 0) {
    set multiplot layout N, 1 title "The sim against measured GPU steps, span by span (make sim-check; milliseconds a step: the median span x spans a step)\n{/*0.85 measured: the row's kept trace (CUDA events, host clock); sim: the sim's own trace of the same configuration on the calibrated profile}"
    set style fill solid 0.8 border -1
    set boxwidth 0.38
    set ylabel "ms a step"
    set yrange [0:*]
    set xtics rotate by -20 font ",9"
    set key top right
    do for [i=1:N] {
      set title T[i] font ",10" noenhanced
      plot F index (i-1) using ($1 - 0.2):3:xtic(2) with boxes lc rgb "#4477aa" title "measured", \
           F index (i-1) using ($1 + 0.2):4 with boxes lc rgb "#ee8866" title "sim"
    }
    unset multiplot
  } else {
    set title "The sim against measured GPU steps, span by span"
    set xrange [0:1]; set yrange [0:1]
    set label 1 "no measured row with a kept trace yet (make sim-check)" at graph 0.5, 0.5 center
    plot NaN notitle
    unset label 1
  }
}
