#!/usr/bin/env bash
# reproduce.sh: regenerates the paper-replication results, figures and claims table.
# `make reproduce` builds first and then runs this; see REPRODUCE.md.
#
#   bash experiments/reproduce.sh [--cpu | --gpu] [--refresh | --run-dir DIR] [--resume] [--no-plots]
#     --cpu      CPU path (default when no GPU): env, microbenchmarks, then every sweep
#                whose "paths" list "cpu" (CPU-scale measured machinery checks and the
#                projections: sim backend + plan), plots, claims table
#     --gpu      GPU path (default when `megatrain --version` lists cuda and nvidia-smi
#                works): env, microbenchmarks, every sweep whose "paths" list "gpu"
#                (measured on cuda, and the same projections), claims table
#                (plots are made on a machine with gnuplot: see REPRODUCE.md)
#     --run-dir  where the run goes (default runs/reproduce-<UTC>, printed at the end): a
#                copy of results/ the sweeps rewrite, plots/{data,out}, claims.md; the
#                checkout is left as it was
#     --refresh  the maintainer's refresh (`make reproduce-refresh`): rewrite the committed
#                results/, plots/ and the generated blocks of README.md and REPRODUCE.md
#     --resume   keep rows already in the results (default: re-run and replace them); rows
#                of sweep entries that no longer exist go either way (a sweep owns its file)
#   env: MT_BIN (binaries, default build/bin), MT_RESULTS (the results directory, in place
#        of the run directory's copy), MT_MICROBENCH_MIN_TIME (default 0.05 s per benchmark)
# Sweeps run in their "order"; adding an experiment = adding a sweep file (its figures and
# claim rows are declared in it: harness/sweep/README.md). Progress: "section k of N" with
# an estimate of the time left; the claims table's rows made by this run say "this run".
# Every step runs even if an earlier one failed; a failed step prints FAILED and makes
# the exit status 1 (a missing sim backend or planner fails here loudly, not silently).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
BIN=${MT_BIN:-$ROOT/build/bin}
RESULTS=${MT_RESULTS:-$ROOT/results}
export MT_BIN=$BIN
PY=${PYTHON:-python3}
path="" force="--force" plots=1 refresh=0 run_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) path=cpu ;;
    --gpu) path=gpu ;;
    --resume) force="" ;;
    --no-plots) plots=0 ;;
    --refresh) refresh=1 ;;
    --run-dir) run_dir=${2:?--run-dir needs a directory}; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reproduce: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$refresh" = 0 ] || [ -z "$run_dir" ] || { echo "reproduce: --refresh writes the committed files; no --run-dir" >&2; exit 2; }
START_UTC=$(date -u +%Y-%m-%dT%H:%M:%SZ)
if [ "$refresh" = 1 ]; then
  RUN=$ROOT PLOTS=$ROOT/plots
else
  RUN=${run_dir:-$ROOT/runs/reproduce-$(date -u +%Y%m%dT%H%M%SZ)}
  mkdir -p "$RUN" || exit 2
  RUN=$(cd "$RUN" && pwd) PLOTS=$RUN/plots
  if [ -z "${MT_RESULTS:-}" ]; then
    RESULTS=$RUN/results
    # the sweeps rewrite a copy of the committed rows: filed GPU rows stay beside this run's
    [ -d "$RESULTS" ] || cp -R "$ROOT/results" "$RESULTS" || exit 2
  fi
fi
mkdir -p "$PLOTS/data" "$PLOTS/out"

T0=$(date +%s)
failed=()
mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
elapsed() { mmss $(( $(date +%s) - T0 )); }
# The estimate of the time left: the last run's section times (results/reproduce_<path>.json,
# "sections") not yet run, scaled by how this run's pace compares on those already run.
declare -A prev_s=()
prev_total=0
while IFS=$'\t' read -r key secs; do
  [[ "$secs" =~ ^[0-9]+$ ]] || continue
  prev_s[$key]=$secs prev_total=$((prev_total + secs))
done < <(jq -r '.sections[]? | "\(.name)\t\(.s)"' "$ROOT/results/reproduce_${path:-cpu}.json" 2>/dev/null)
# a record without section times (older runs) still gives its whole time
last_s=$(jq -r '.wall_s // empty | floor' "$ROOT/results/reproduce_${path:-cpu}.json" 2>/dev/null || true)
[[ "$last_s" =~ ^[0-9]+$ ]] || last_s=0
k=0 N=0 prev_done=0 sections_json=""
step() { echo "== [$(elapsed)] $*" >&2; }
# section KEY WHAT: "section k of N (about m:ss left): WHAT".
section() {
  k=$((k + 1))
  local el=$(( $(date +%s) - T0 )) left=""
  if [ "$prev_total" -gt 0 ] && [ "$prev_done" -gt 0 ]; then
    left="about $(mmss $(( (prev_total - prev_done) * el / prev_done ))) left"
  elif [ "$prev_total" -gt "$el" ]; then left="about $(mmss $((prev_total - el))) left"
  elif [ "$prev_total" = 0 ] && [ "$last_s" -gt "$el" ]; then left="about $(mmss $((last_s - el))) left"
  elif [ "$k" -gt 1 ]; then left="about $(mmss $((el * (N - k + 1) / (k - 1)))) left"; fi
  echo "== [$(elapsed)] section $k of $N${left:+ ($left)}: $2" >&2
}
# run NAME CMD...: runs a section, records it as failed (loudly) when it exits non-zero,
# says how long it took when that was over 10 s, and keeps its time for the next estimate.
run() {
  local name=$1 t=$(date +%s) rc=0 key=${1%%[: ]*} d; shift
  section "$key" "$name"
  "$@" || rc=$?
  d=$(( $(date +%s) - t ))
  [ "$d" -le 10 ] || echo "   ($key: $d s)" >&2
  prev_done=$(( prev_done + ${prev_s[$key]:-0} ))
  sections_json+="${sections_json:+,}$(jq -nc --arg n "$key" --argjson s "$d" '{name: $n, s: $s}')"
  if [ "$rc" != 0 ]; then
    echo "FAILED: $name (exit $rc): $*" >&2
    failed+=("$key")
  fi
}

[ -x "$BIN/megatrain" ] || { echo "reproduce: $BIN/megatrain not found; HINT: make build (or set MT_BIN)" >&2; exit 2; }
command -v "$PY" >/dev/null || { echo "reproduce: python3 not found" >&2; exit 2; }
version=$("$BIN/megatrain" --version)
if [ -z "$path" ]; then
  path=cpu
  if echo "$version" | grep -q '"cuda"' && nvidia-smi -L >/dev/null 2>&1; then path=gpu; fi
fi
host=$(hostname -s 2>/dev/null || echo host)
mkdir -p "$RESULTS"
step "megatrain $version; path: $path; results: $RESULTS; host: $host"
[ "$refresh" = 1 ] && step "--refresh: the committed results/, plots/ and README/REPRODUCE blocks are rewritten"

sweep() { "$PY" -m harness.sweep.run --out-dir "$RESULTS" $force "$@"; }

list=$("$PY" -m harness.sweep.sweeps --list "$path") || { echo "reproduce: cannot list the sweeps" >&2; exit 2; }
# sections: env, microbenchmarks, each sweep, export, compare, spans, the plots, claims (+ docs)
N=$(( 2 + $(grep -c . <<< "$list") + 3 + plots + 1 + refresh ))

# Paths go to commands as arguments, never into code (a path may hold quotes or $(...)).
# save_to FILE CMD...: CMD's stdout to FILE through a temp file (an interrupted run leaves the old one).
save_to() { local f=$1; shift; "$@" > "$f.tmp" && mv "$f.tmp" "$f"; }
env_block() { save_to "$1" "$BIN/mt-env" && cat "$1" >&2; }

# (a) the environment block of this machine
run "env (mt-env) -> $RESULTS/env_$host.json" env_block "$RESULTS/env_$host.json"

# (b) microbenchmarks (short run)
if [ -x "$BIN/mt-microbench" ]; then
  run "microbenchmarks: host memcpy/triad, AdamW, GEMM, layer kernels, attention, copies (about 1.5 min on 2 cores) -> $RESULTS/microbench_$host.json" \
    save_to "$RESULTS/microbench_$host.json" "$BIN/mt-microbench" --benchmark_min_time="${MT_MICROBENCH_MIN_TIME:-0.05}"
else
  echo "FAILED: mt-microbench not built (Google Benchmark missing? make deps)" >&2
  failed+=("microbenchmarks")
fi

# (c) the projections need the sim backend and the planner (fail loudly if not)
if ! echo "$version" | grep -q '"sim"'; then
  echo "FAILED: this megatrain has no sim backend ($version): projections cannot run" >&2
  failed+=("sim backend missing")
fi
if ! "$BIN/megatrain" plan --config experiments/models/qwen2.5-7b.json --batch 1 --seq-len 1024 \
      --precision paper --hardware gh200-480g >/dev/null; then
  echo "FAILED: megatrain plan does not work: projections cannot run" >&2
  failed+=("megatrain plan missing")
fi

# (d) every sweep of this path, in its order (experiments/sweeps/*.json, "paths" and "order");
# each rewrites its own results file. On the GPU path the sweeps marked hardware_from_gpu
# project on the lent machine's profile.
profile=""
if [ "$path" = gpu ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  # the profile whose gpu.name_match the GPU's name meets, else the one marked "*" (h100-128g)
  profile=$("$PY" -c 'import sys; from harness import resultslib
print(resultslib.profile_of_gpu(sys.argv[1], fallback=True))' "$gpu")
  step "GPU: $gpu (profile for the paired projections: $profile)"
fi
while IFS=$'\t' read -r file from_gpu desc; do
  [ -n "$file" ] || continue
  hw=()
  [ "$from_gpu" = 1 ] && [ -n "$profile" ] && hw=(--hardware "$profile")
  run "$(basename "$file" .json): ${desc:0:110}" sweep "${hw[@]}" "$file"
done <<< "$list"

# plot_all: every figure script over the run's plots/data into plots/out. gnuplot gets them
# through a symlink of a plain name: the scripts splice paths into gnuplot strings and shell
# commands (compare.gp's `test -f`), where a quote or $(...) in the run directory would break
# or run. The "no valid points" warnings of series without rows are expected: counted in
# $PLOTS/skipped.txt, not shown; any other gnuplot message is.
plot_all() {
  local gp rc=0 safe
  safe=$(mktemp -d /tmp/mt-plots.XXXXXX) && ln -s "$PLOTS" "$safe/p" || return 1
  : > "$PLOTS/skipped.txt"
  for gp in plots/*.gp; do
    [ "$gp" = plots/common.gp ] && continue
    gnuplot -e "DATA='$safe/p/data/'; OUT='$safe/p/out/'" "$gp" 2> "$PLOTS/gnuplot.err" ||
      { echo "FAILED: gnuplot $gp" >&2; rc=1; }
    grep -i 'no valid points' "$PLOTS/gnuplot.err" | sed "s|^|$gp: |" >> "$PLOTS/skipped.txt"
    grep -iv 'no valid points' "$PLOTS/gnuplot.err" | grep -v '^ *$' >&2 || true
  done
  rm -f "$PLOTS/gnuplot.err" "$safe/p" && rmdir "$safe"
  return $rc
}

# (e) figures: the data the sweeps declare, then every plots/*.gp
run "export results -> $PLOTS/data/*.tsv" "$PY" -m harness.sweep.export --results "$RESULTS" --out "$PLOTS/data"
# one model and batch on every hardware profile (plan --compare, with the sim's error band where
# results/sim_validation.json has one): the data of plots/compare.gp, made beside the figure
band=()
[ -f "$RESULTS/sim_validation.json" ] && band=(env MT_SIM_VALIDATION="$RESULTS/sim_validation.json")
run "plan --compare over experiments/hardware -> $PLOTS/out/compare.{jsonl,tsv,gpi}" \
  "${band[@]}" "$PY" -m harness.plan_compare --bin "$BIN" --out "$PLOTS/out"
# the sim against the measured GPU steps span by span (make sim-check's spans): plots/spans.gp's data
if [ -f "$RESULTS/sim_validation.json" ]; then
  run "sim_validation.json spans -> $PLOTS/out/spans.{tsv,gpi}" \
    "$PY" -m harness.sweep.span_check --export "$RESULTS/sim_validation.json" --out "$PLOTS/out"
else
  k=$((k + 1))  # no spans section here: it still counts in N
fi
if [ "$plots" = 1 ]; then
  if command -v gnuplot >/dev/null; then
    run "figures: every plots/*.gp -> $PLOTS/out" plot_all
    [ ! -s "$PLOTS/skipped.txt" ] || echo "   (gnuplot skipped $(wc -l < "$PLOTS/skipped.txt") empty series: a figure's" \
      "GPU or projected series without rows in these results draws nothing, as meant; list: $PLOTS/skipped.txt)" >&2
  elif [ "$path" = gpu ]; then
    step "no gnuplot here (GPU machine): copy results/ back and run: bash experiments/reproduce.sh --resume"
  else
    echo "FAILED: gnuplot not found; HINT: make deps" >&2
    failed+=("plots")
  fi
fi

# (f) the claims table, computed from the results files; rows this run made say "this run"
run "claims table -> $RESULTS/claims.md" \
  "$PY" -m harness.sweep.claims --results "$RESULTS" --since "$START_UTC" --markdown "$RESULTS/claims.md" --brief

# (g) how long this took, and the figures in README.md / REPRODUCE.md regenerated from
# the files (a CTest test checks they match)
step "done in $(elapsed)"
printf '{"schema":"megatrain.reproduce/1","path":"%s","host":"%s","wall_s":%d,"failed_steps":%d,"sections":[%s],"env":%s}\n' \
  "$path" "$host" $(( $(date +%s) - T0 )) ${#failed[@]} "$sections_json" "$("$BIN/mt-env")" > "$RESULTS/reproduce_$path.json"
if [ "$refresh" = 1 ]; then
  run "README.md / REPRODUCE.md figures from results/" "$PY" -m harness.sweep.docs --write
else
  echo "reproduce: this run is in $RUN (results/, plots/out/, results/claims.md); the checkout is unchanged." \
    "To commit its figures: make reproduce-refresh" >&2
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "reproduce: ${#failed[@]} step(s) FAILED: ${failed[*]}" >&2
  exit 1
fi
