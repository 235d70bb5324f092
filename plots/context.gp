# Throughput vs context length (C3): Qwen2.5-7B on GH200, 64k tokens per step.
NAME = "context"
load "plots/common.gp"
load DATA.NAME.".gpi"
do for [FMT in "png svg"] {
  eval term(FMT)
  set output OUT.NAME.".".FMT
  set title "Throughput vs context length: Qwen2.5-7B on GH200, 64k tokens/step (batch = 65536/seq, min 1), paper precision\n{/*0.85 tokens/s = tokens / step time; open squares = projected (sim backend); crosses at 0 = does not fit in GPU memory (megatrain plan)}"
  set xlabel "sequence length (tokens)"
  set ylabel "tokens/s"
  set logscale x 2
  set xtics ("1k" 1024, "4k" 4096, "16k" 16384, "64k" 65536, "128k" 131072, "256k" 262144, "512k" 524288)
  set xrange [700:800000]
  set yrange [-100:*]
  set key top right
  if (N > 0) {
    plot for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:(K[i] == 0 ? NaN : $2) with linespoints pt pt(K[i]) ps ps(K[i]) dt dt(K[i]) lw 2 lc i title (K[i] == 0 ? "" : T[i]), \
         for [i=1:N] DATA.NAME.".tsv" index (i-1) using 1:(K[i] == 0 ? $2 : NaN) with points pt pt(K[i]) ps ps(K[i]) lw 2 lc i title (K[i] == 0 ? T[i] : "")
  } else {
    set label 1 no_data_note at graph 0.5, 0.5 center; plot NaN notitle; unset label 1
  }
}
