# common.gp: shared settings, loaded by every figure script (run from the repo root:
# `gnuplot plots/FIG.gp`). Data: plots/data/FIG.tsv + FIG.gpi from harness/sweep/export.py.
# Point style says how a point was obtained:
#   measured = filled circle, solid line;  extrapolated = filled triangle, solid line;
#   projected (sim backend or plan) = open square, dashed line;  does not fit = cross.
if (!exists("DATA")) DATA = "plots/data/"
if (!exists("OUT")) OUT = "plots/out/"
set datafile separator "\t"
set datafile missing "NaN"
set grid lc rgb "#dddddd"
set border lc rgb "#444444"
set key top left box opaque samplen 3 spacing 1.2 font ",10"
# Legends are names as written (deepspeed_zero3, N_all), never enhanced-text markup; titles keep it.
set key noenhanced
set style line 100 lc rgb "#888888" dt 3 lw 1.5
pt(k) = (k == 1 ? 7 : (k == 2 ? 9 : (k == 3 ? 4 : 2)))
dt(k) = (k == 3 ? 2 : 1)
ps(k) = (k == 0 ? 2.0 : 1.4)
# output: for [FMT in "png svg"] { term(FMT) ; set output OUT.NAME.".".FMT ; ... }
term(fmt) = (fmt eq "png") ? \
  sprintf("set terminal pngcairo size %d,%d font 'DejaVu Sans,11' enhanced", W, H) : \
  sprintf("set terminal svg size %d,%d font 'DejaVu Sans,11' enhanced dynamic background rgb 'white'", W, H)
if (!exists("W")) W = 1200
if (!exists("H")) H = 750
no_data_note = "no rows yet: run make reproduce (or harness/sweep/run.py on the sweep)"
