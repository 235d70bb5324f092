#!/usr/bin/env bash
# reproduce.sh: regenerates the paper-replication results, figures and claims table.
# `make reproduce` builds first and then runs this; see REPRODUCE.md.
#
#   bash experiments/reproduce.sh [--cpu | --gpu] [--resume] [--no-plots]
#     --cpu      CPU path (default when no GPU): env, microbenchmarks, then every sweep
#                whose "paths" list "cpu" (CPU-scale measured machinery checks and the
#                projections: sim backend + plan), plots, claims table
#     --gpu      GPU path (default when `megatrain --version` lists cuda and nvidia-smi
#                works): env, microbenchmarks, every sweep whose "paths" list "gpu"
#                (measured on cuda, and the same projections), claims table
#                (plots are made on a machine with gnuplot: see REPRODUCE.md)
#     --resume   keep rows already in results/ (default: re-run and replace them); rows
#                of sweep entries that no longer exist go either way (a sweep owns its file)
#   env: MT_BIN (binaries, default build/bin), MT_RESULTS (default results),
#        MT_MICROBENCH_MIN_TIME (default 0.05 s per benchmark)
# Sweeps run in their "order"; adding an experiment = adding a sweep file (its figures and
# claim rows are declared in it: harness/sweep/README.md). With the default results/, the
# end rewrites the generated figures in README.md and REPRODUCE.md (harness/sweep/docs.py).
# Every step runs even if an earlier one failed; a failed step prints FAILED and makes
# the exit status 1 (a missing sim backend or planner fails here loudly, not silently).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
BIN=${MT_BIN:-$ROOT/build/bin}
RESULTS=${MT_RESULTS:-$ROOT/results}
export MT_BIN=$BIN
PY=${PYTHON:-python3}
path="" force="--force" plots=1
for a in "$@"; do
  case "$a" in
    --cpu) path=cpu ;;
    --gpu) path=gpu ;;
    --resume) force="" ;;
    --no-plots) plots=0 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reproduce: unknown option '$a' (see --help)" >&2; exit 2 ;;
  esac
done

T0=$(date +%s)
failed=()
elapsed() { local s=$(( $(date +%s) - T0 )); printf '%d:%02d' $((s / 60)) $((s % 60)); }
step() { echo "== [$(elapsed)] $*" >&2; }
# run NAME CMD...: runs a step, records it as failed (loudly) when it exits non-zero.
run() {
  local name=$1; shift
  step "$name"
  local rc=0
  "$@" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "FAILED: $name (exit $rc): $*" >&2
    failed+=("$name")
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

sweep() { "$PY" harness/sweep/run.py --out-dir "$RESULTS" $force "$@"; }

# into OUT CMD...: CMD's stdout replaces OUT whole (OUT.tmp, then a rename). A function, not a
# `bash -c` string: MT_RESULTS and MT_BIN are paths of any characters, never code
into() { local out=$1; shift; "$@" > "$out.tmp" && mv "$out.tmp" "$out"; }

# (a) the environment block of this machine
env_step() { into "$RESULTS/env_$host.json" "$BIN/mt-env" && cat "$RESULTS/env_$host.json" >&2; }
run "env (mt-env)" env_step

# (b) microbenchmarks (short run)
if [ -x "$BIN/mt-microbench" ]; then
  run "microbenchmarks -> results/microbench_$host.json" into "$RESULTS/microbench_$host.json" \
    "$BIN/mt-microbench" --benchmark_min_time="${MT_MICROBENCH_MIN_TIME:-0.05}"
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
  profile=$("$PY" -c 'import sys; sys.path.insert(0, "harness"); import resultslib
print(resultslib.profile_of_gpu(sys.argv[1], fallback=True))' "$gpu")
  step "GPU: $gpu (profile for the paired projections: $profile)"
fi
list=$("$PY" harness/sweep/sweeps.py --list "$path") || { echo "reproduce: cannot list the sweeps" >&2; exit 2; }
while IFS=$'\t' read -r file from_gpu desc; do
  [ -n "$file" ] || continue
  hw=()
  [ "$from_gpu" = 1 ] && [ -n "$profile" ] && hw=(--hardware "$profile")
  run "$(basename "$file" .json): ${desc:0:110}" sweep "${hw[@]}" "$file"
done <<< "$list"

# (e) figures: the data the sweeps declare, then every plots/*.gp
run "export results -> plots/data/*.tsv" "$PY" harness/sweep/export.py --results "$RESULTS" --out plots/data
# one model and batch on every hardware profile (plan --compare, with the sim's error band where
# results/sim_validation.json has one): the data of plots/compare.gp, made beside the figure
band=()
[ -f "$RESULTS/sim_validation.json" ] && band=(env MT_SIM_VALIDATION="$RESULTS/sim_validation.json")
run "plan --compare over experiments/hardware -> plots/out/compare.{jsonl,tsv,gpi}" \
  "${band[@]}" "$PY" harness/plan_compare.py --bin "$BIN" --out plots/out
# the sim against the measured GPU steps span by span (make sim-check's spans): plots/spans.gp's data
if [ -f "$RESULTS/sim_validation.json" ]; then
  run "sim_validation.json spans -> plots/out/spans.{tsv,gpi}" \
    "$PY" harness/sweep/span_check.py --export "$RESULTS/sim_validation.json" --out plots/out
fi
if [ "$plots" = 1 ]; then
  if command -v gnuplot >/dev/null; then
    mkdir -p plots/out
    for gp in plots/*.gp; do
      [ "$gp" = plots/common.gp ] || run "plot $gp" gnuplot "$gp"
    done
  elif [ "$path" = gpu ]; then
    step "no gnuplot here (GPU machine): copy results/ back and run: bash experiments/reproduce.sh --resume"
  else
    echo "FAILED: gnuplot not found; HINT: make deps" >&2
    failed+=("plots")
  fi
fi

# (f) the claims table, computed from the results files
step "claims table (results/claims.md)"
"$PY" harness/sweep/claims.py --results "$RESULTS" --markdown "$RESULTS/claims.md" || failed+=("claims table")

# (g) how long this took, and the figures in README.md / REPRODUCE.md regenerated from
# the files (a CTest test checks they match)
step "done in $(elapsed)"
if [ "$RESULTS" = "$ROOT/results" ]; then
  printf '{"schema":"megatrain.reproduce/1","path":"%s","host":"%s","wall_s":%d,"failed_steps":%d,"env":%s}\n' \
    "$path" "$host" $(( $(date +%s) - T0 )) ${#failed[@]} "$("$BIN/mt-env")" > "$RESULTS/reproduce_$path.json"
  run "README.md / REPRODUCE.md figures from results/" "$PY" harness/sweep/docs.py --write
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "reproduce: ${#failed[@]} step(s) FAILED: ${failed[*]}" >&2
  exit 1
fi
