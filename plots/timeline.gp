# One projected step of the megatrain schedule: what each stream and host thread does.
NAME = "timeline"
load "plots/common.gp"
load DATA.NAME.".gpi"
W = 1500
H = 560
array CAT[8] = ["forward", "recompute", "backward", "embedding / loss head", "H2D copy (weights in)", "D2H copy (grads out)", "gradient accumulate", "AdamW"]
array COL[8] = [0x1f77b4, 0x9ecae1, 0x08306b, 0x9467bd, 0x2ca02c, 0xd62728, 0xff7f0e, 0x8c564b]
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set title (N > 0 ? "One step of the megatrain schedule (projected by the sim backend): ".T[1] : "timeline")."\n{/*0.85 a steady-state step (the second-to-last simulated), from its start to the next step start; each bar is one layer phase on its stream or host thread}"
  set xlabel "time within the step (ms)"
  set ytics ("compute" 0, "H2D (weights in)" 1, "D2H (grads out)" 2, "grad-drain thread" 3, "optimizer thread" 4)
  set yrange [4.6:-0.6]
  set xrange [0:*]
  set key outside right top vertical font ",10" title "op kind"
  set style fill solid 1.0 noborder
  if (N > 0) {
    plot DATA.NAME.".tsv" index 0 using (($2+$3)/2):1:(($3-$2)/2):(0.35):(COL[int($4)+1]) with boxxyerror lc rgb variable notitle, \
         for [c=1:8] NaN with boxes lc rgb COL[c] fs solid title CAT[c]
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
