# One model and batch across every hardware profile (megatrain plan --compare), with the
# sim's error band as error bars. Data: CDATA/compare.tsv + compare.gpi from
# harness/plan_compare.py (reproduce.sh makes them beside the figure; plots/data/ holds
# only what export.py makes of results/).
NAME = "compare"
load "plots/common.gp"
if (!exists("CDATA")) CDATA = OUT
F = CDATA.NAME.".tsv"
N = 0
if (system("test -f '".CDATA.NAME.".gpi' && echo 1") eq "1") { load CDATA.NAME.".gpi" }
dx(i) = (i - (N + 1) / 2.0) * 0.22   # the configurations side by side within a profile's slot
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set ylabel "TFLOPS (6N, the whole step)"
  set yrange [0:*]
  set key below  # beside the points it would hide some (gb200's are at the top left)
  if (N > 0) {
    set title sprintf("One model and batch on every hardware profile (projected: megatrain plan --compare; seq 1024, paper)\n{/*0.85 points: the sim's step; bars: its error band against measured runs (%s)}\n{/*0.85 open: no GPU of that kind measured; x: the planner's closed form}", BAND_FILE)
    set xrange [-0.6:M - 0.4]
    set xtics () rotate by -25 font ",10"
    do for [j=1:M] { set xtics add (P[j] j - 1) }
    plot for [i=1:N] F index (i-1) using ($1 + dx(i)):($7 == 0 ? $3 : NaN):4:5 with yerrorbars pt 7 ps 1.6 lc i title T[i].": sim, band measured on this profile" noenhanced, \
         for [i=1:N] F index (i-1) using ($1 + dx(i)):($7 == 1 ? $3 : NaN):4:5 with yerrorbars pt 9 ps 1.6 lc i title T[i].": sim, band of its GPU on another host (grown)" noenhanced, \
         for [i=1:N] F index (i-1) using ($1 + dx(i)):($7 == 2 ? $3 : NaN) with points pt 6 ps 1.6 lc i title T[i].": sim, unvalidated" noenhanced, \
         for [i=1:N] F index (i-1) using ($1 + dx(i)):6 with points pt 2 ps 1.2 lc i title (i == 1 ? "x: the planner's closed form" : ""), \
         for [i=1:N] F index (i-1) using ($1 + dx(i)):(0):($8 == 0 ? "does not fit" : "") with labels rotate left offset 0,0.5 font ",8" tc lt i notitle
  } else {
    set title "One model and batch on every hardware profile (megatrain plan --compare)"
    set xrange [0:1]; set yrange [0:1]
    set label 1 "no data: run python3 -m harness.plan_compare (make reproduce does)" at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
