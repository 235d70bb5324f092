#!/usr/bin/env bash
# ab.sh: A/B timing of two commits on this machine, interleaved (A B A B ...).
#
#   ci/ab.sh [options] REV_A REV_B
# (docs/MEASURED.md, "Regression checks"; rounds alternate A B, B A so a drift in the load cancels)
#   options: --rounds N (5, at least 5)  --threshold PCT (7)  --bench REGEX (all)
#            --threads N (1)             OMP_NUM_THREADS and OPENBLAS_NUM_THREADS of both sides;
#                                        0 leaves them as they are (a loaded machine stalls a
#                                        multi-threaded pass at its barriers: its time swings 10x)
#            --bin-a DIR / --bin-b DIR   use built binaries (megatrain, mt-microbench) for
#                                        that side instead of building its revision
#            --work DIR (build/ab)       worktrees and builds, cached by commit
#            --keep FILE                 also write the raw per-round rows (JSON lines)
#
# Each revision is checked out in a git worktree of this repository and built (CPU:
# -DMT_CUDA=OFF; with a GPU and nvcc, CUDA too), once per commit. Benchmarks, each timed
# on both sides in every round (lower is better):
#   train/cpu/small   megatrain train --backend cpu, the tiny_qwen2 fixture, batch 2 x 64
#   train/cpu/mid     the c2_cpu model (8 layers, hidden 256), batch 1 x 256
#   host/adamw        mt-microbench adamw/paper (the host AdamW pass)
#   host/grad_sumsq   mt-microbench grad_sumsq/bf16 (the gradient drain's pass)
#   copy/h2d          mt-microbench copy/cpu/pinned/h2d/16 MiB
#   train/cuda/small  with a GPU only: the tiny fixture on --backend cuda
# A run's time is its best step or repetition. Per benchmark: the median over rounds of B/A (each round's pair), its 95% bootstrap
# interval, and a verdict: REGRESSION when the ratio exceeds 1 + threshold and the
# interval excludes 1 (FASTER likewise below), INCONCLUSIVE when the ratio is beyond the
# threshold but the interval holds 1, else SAME. A REGRESSION is measured again in fresh
# rounds and counts only when that says REGRESSION too. MT_MB_HOST_N sizes the host passes.
# Exit: 0 no regression, 1 a regression (named on stdout), 2 bad usage or a revision
# that does not build or run.
set -euo pipefail

die() { echo "ab: $*" >&2; exit 2; }
say() { echo "ab: $*" >&2; }
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=5 threshold=7 threads=1 bench_re='.' bin_a='' bin_b='' work="$root/build/ab" keep=''
revs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --threshold) threshold=${2:?--threshold needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --bench) bench_re=${2:?--bench needs a regex}; shift 2 ;;
    --bin-a) bin_a=${2:?--bin-a needs a directory}; shift 2 ;;
    --bin-b) bin_b=${2:?--bin-b needs a directory}; shift 2 ;;
    --work) work=${2:?--work needs a directory}; shift 2 ;;
    --keep) keep=${2:?--keep needs a file}; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) revs+=("$1"); shift ;;
  esac
done
[ ${#revs[@]} -eq 2 ] || die "usage: ci/ab.sh [options] REV_A REV_B (see --help)"
[[ "$rounds" =~ ^[0-9]+$ ]] && [ "$rounds" -ge 5 ] || die "--rounds '$rounds': a whole number, at least 5"
[[ "$threshold" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--threshold '$threshold' is not a non-negative number"
[[ "$threads" =~ ^[0-9]+$ ]] || die "--threads '$threads' is not a whole number"
[ "$threads" = 0 ] || export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
command -v jq >/dev/null || die "jq not found; HINT: apt-get install jq (make deps)"
command -v python3 >/dev/null || die "python3 not found"

gpu=false
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null; then gpu=true; fi

# build SIDE REV: echoes the bin directory of REV's build (cached by commit).
build() {
  local side=$1 rev=$2 sha dir cuda=OFF
  sha=$(git -C "$root" rev-parse --verify -q "$rev^{commit}") || die "$side: '$rev' is not a commit here"
  $gpu && cuda=ON
  dir="$work/${sha:0:12}-cuda$cuda"
  if [ ! -x "$dir/build/bin/megatrain" ] || [ ! -x "$dir/build/bin/mt-microbench" ]; then
    mkdir -p "$work"
    git -C "$root" worktree prune
    [ -d "$dir/src" ] || git -C "$root" worktree add -q --detach "$dir/src" "$sha" >&2 ||
      die "$side: git worktree add failed for $rev"
    say "building $side = $rev (${sha:0:12}) in $dir (a few minutes on 2 cores)"
    { cmake -S "$dir/src" -B "$dir/build" -DMT_CUDA=$cuda -DCMAKE_BUILD_TYPE=Release &&
      cmake --build "$dir/build" -j"$(nproc)" --target megatrain mt-microbench; } > "$dir.log" 2>&1 ||
      { tail -5 "$dir.log" >&2; die "$side: $rev does not build (log: $dir.log)"; }
  fi
  echo "$dir/build/bin"
}
if [ -n "$bin_a" ]; then dir_a=$(cd "$bin_a" && pwd); else dir_a=$(build A "${revs[0]}"); fi
if [ -n "$bin_b" ]; then dir_b=$(cd "$bin_b" && pwd); else dir_b=$(build B "${revs[1]}"); fi
for d in "$dir_a" "$dir_b"; do
  [ -x "$d/megatrain" ] && [ -x "$d/mt-microbench" ] || die "$d: no megatrain and mt-microbench there"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The mid-size model: c2_cpu's qwen2 shape (experiments/sweeps/c2_cpu.json), from this checkout.
jq '. + {vocab_size: 4096, hidden_size: 256, intermediate_size: 768, num_hidden_layers: 8,
         num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 4096,
         max_window_layers: 8, sliding_window: 4096, tie_word_embeddings: false}' \
  "$root/experiments/models/qwen2.5-7b.json" > "$tmp/mid.json" || die "cannot write the mid-size config"
cp "$root/megatrain/tests/fixtures/tiny_qwen2/config.json" "$tmp/small.json"

want() { [[ "$1" =~ $bench_re ]]; }
# Each run's time is its best (the fastest step after 2 warm-up steps, the fastest of the
# repetitions): a loaded machine only ever adds time, so the minimum is the steadiest estimate.
# train NAME BIN BACKEND CONFIG BATCH SEQ STEPS
train() {
  local name=$1 bin=$2 backend=$3 cfg=$4 batch=$5 seq=$6 steps=$7 ms
  ms=$("$bin/megatrain" train --config "$cfg" --init random --seed 1 --data synthetic --batch "$batch" \
         --seq-len "$seq" --steps "$steps" --backend "$backend" 2> "$tmp/err" |
       jq -s '[.[] | select(.step > 2) | .step_ms | select(type == "number")] | min') ||
    { tail -3 "$tmp/err" >&2; die "$name: megatrain train failed in $bin"; }
  printf '%s %s\n' "$name" "$ms"
}
# micro BIN: one mt-microbench run over the host passes and the copy; name and median ms.
micro() {
  local bin=$1 filt=() re
  want host/adamw && filt+=('adamw/paper/')
  want host/grad_sumsq && filt+=('grad_sumsq/bf16/')
  want copy/h2d && filt+=('copy/cpu/pinned/h2d/16777216/')
  [ ${#filt[@]} -gt 0 ] || return 0
  re="^($(IFS='|'; echo "${filt[*]}"))"
  "$bin/mt-microbench" --benchmark_filter="$re" --benchmark_repetitions=5 2> "$tmp/err" > "$tmp/mb.json" ||
    { tail -3 "$tmp/err" >&2; die "mt-microbench failed in $bin"; }
  jq -r '[.benchmarks[] | select(.run_type == "iteration")
         | {b: (if (.name | startswith("adamw")) then "host/adamw" elif (.name | startswith("grad_sumsq"))
                then "host/grad_sumsq" else "copy/h2d" end), t: .real_time}] | group_by(.b)[]
         | .[0].b + " " + (map(.t) | min | tostring)' "$tmp/mb.json"
}
side() {
  local bin=$1
  if want train/cpu/small; then train train/cpu/small "$bin" cpu "$tmp/small.json" 2 64 16; fi
  if want train/cpu/mid; then train train/cpu/mid "$bin" cpu "$tmp/mid.json" 1 256 5; fi
  micro "$bin"
  if $gpu && want train/cuda/small; then train train/cuda/small "$bin" cuda "$tmp/small.json" 2 64 16; fi
}

# rounds OUT WHAT: the interleaved rounds of the benchmarks matching $bench_re, rows to OUT.
rounds() {
  local out=$1 what=$2 t0 r s bin el order
  : > "$out"
  t0=$(date +%s)
  for r in $(seq 1 "$rounds"); do
    order="A B"; [ $((r % 2)) -eq 1 ] || order="B A"   # A B B A A B ...: a drift in the load cancels
    for s in $order; do
      if [ "$s" = A ]; then bin=$dir_a; else bin=$dir_b; fi
      side "$bin" | while read -r name ms; do
        jq -nc --argjson r "$r" --arg s "${s,,}" --arg b "$name" --argjson ms "${ms:-null}" \
          '{round: $r, side: $s, bench: $b, ms: $ms}'
      done >> "$out"
    done
    el=$(( $(date +%s) - t0 ))
    say "$what: round $r of $rounds done (${el}s, about $(( el * (rounds - r) / r ))s left)"
  done
  [ -s "$out" ] || die "no benchmark matched --bench '$bench_re'"
}
stats() { PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" python3 -m ci.ab_stats --threshold "$threshold" "$@"; }

say "A = $dir_a, B = $dir_b; $rounds rounds, each A and B in turn, threads ${OMP_NUM_THREADS:-default}"
rounds "$tmp/rows.jsonl" measure
[ -z "$keep" ] || cp "$tmp/rows.jsonl" "$keep"
echo "# ab: A = ${revs[0]} ($dir_a), B = ${revs[1]} ($dir_b), $rounds rounds interleaved, threshold ${threshold}%, threads ${OMP_NUM_THREADS:-default}"
rc=0
stats --suspects "$tmp/suspects" "$tmp/rows.jsonl" > "$tmp/table" || rc=$?
cat "$tmp/table"
[ "$rc" -le 1 ] || exit 2
[ -s "$tmp/suspects" ] || exit "$rc"
# A regression must show twice: the suspects are measured again in fresh rounds, and only
# a second REGRESSION counts (one set of 5 rounds all on one side happens by chance 1 in 16).
bench_re="^($(paste -sd'|' "$tmp/suspects"))\$"
say "confirming $(paste -sd' ' "$tmp/suspects") in $rounds fresh rounds"
rounds "$tmp/confirm.jsonl" confirm
[ -z "$keep" ] || cat "$tmp/confirm.jsonl" >> "$keep"
echo "# ab: confirmation of $(paste -sd' ' "$tmp/suspects") ($rounds fresh rounds)"
rc2=0
stats "$tmp/confirm.jsonl" || rc2=$?
[ "$rc2" -le 1 ] || exit 2
grep -q 'FAILED-RUN' "$tmp/table" && exit 1
exit "$rc2"
