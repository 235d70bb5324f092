#!/usr/bin/env bash
# run_peers.sh: run the real peers on the GPU machine, one process per
# (peer, batch), appending one results row each to results/peers_<utc date>.jsonl.
# Run from anywhere; paths are relative to the repo root.
#
#   bash baselines/peers/run_peers.sh [options] [-- extra flags for every python peer]
#     --config FILE     HF config.json (default experiments/models/qwen2.5-14b.json)
#     --batches "B..."  batch sizes (default "16")
#     --seq-len T       (default 1024)
#     --layers N        decoder layers to run (default: the config's; 14B width on a
#                       128 GiB host needs a cut, e.g. 8: see README.md)
#     --peers "P..."    any of fsdp2_offload deepspeed_zero3 official
#                       (default "fsdp2_offload deepspeed_zero3 official")
#     --steps N --warmup N   timed / warm-up steps (defaults 5 / 2)
#     --timeout S       per-run limit in seconds (default 1200)
#     --out FILE        results file (default results/peers_<YYYYMMDD>.jsonl)
#     --experiment E    the rows' experiment (default "peers")
#
# Before the runs it installs .whl/ (fetch_wheels.sh, carried to the machine) into
# /tmp/peers_site and puts that on PYTHONPATH, unless deepspeed is already importable.
# A peer that fails (exit != 0, or the timeout) gets a row
# {"schema","experiment","system","model","batch","seq_len","layers_run","error","utc"}
# and the loop goes on; "official" (megatrain_official.py) without .official/ is
# skipped (no row; official_prepare.sh lays it out, carried as .official).
# Progress and the peers' logs go to stderr, and, when $OUT is set (the device
# tool), the results file and the whole log are copied into $OUT after every run.
# Exit status: 0 if every run that was not skipped wrote a row, 1 otherwise.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

config=experiments/models/qwen2.5-14b.json
batches=16 seq=1024 layers="" peers="fsdp2_offload deepspeed_zero3 official"
steps=5 warmup=2 tmo=1200 out="" experiment=peers
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=${2:?--config needs a value}; shift 2 ;;
    --batches) batches=${2:?--batches needs a value}; shift 2 ;;
    --seq-len) seq=${2:?--seq-len needs a value}; shift 2 ;;
    --layers) layers=${2:?--layers needs a value}; shift 2 ;;
    --peers) peers=${2:?--peers needs a value}; shift 2 ;;
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --warmup) warmup=${2:?--warmup needs a value}; shift 2 ;;
    --timeout) tmo=${2:?--timeout needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --experiment) experiment=${2:?--experiment needs a value}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_peers: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -r "$config" ] || { echo "run_peers: $config: cannot read model config" >&2; exit 2; }
set -f  # --peers and --batches are lists of words: never globbed against the working folder
for n in $batches "$seq" "$steps" "$warmup" "$tmo" ${layers:+"$layers"}; do
  case $n in ''|*[!0-9]*) echo "run_peers: '$n' is not a whole number (--batches, --seq-len, --steps, --warmup, --timeout, --layers)" >&2; exit 2 ;; esac
done
for p in $peers; do
  case "$p" in fsdp2_offload|deepspeed_zero3|official) ;;
    *) echo "run_peers: unknown peer '$p' (fsdp2_offload, deepspeed_zero3, official)" >&2; exit 2 ;;
  esac
done
out=${out:-results/peers_$(date -u +%Y%m%d).jsonl}
# never rows (nor error rows) appended to the model config, a link to it or a file in its folder
python3 - "$out" "$config" <<'EOF' || exit 2
import sys
from harness.resultslib import safepath
try:
    safepath.refuse_own_input(sys.argv[1], sys.argv[2:])
except safepath.PathError as e:
    sys.exit(f"run_peers: {e}")
EOF
mkdir -p "$(dirname "$out")"
log_all=$(mktemp /tmp/run_peers.XXXXXX.log)
say() { echo "run_peers: $*" | tee -a "$log_all" >&2; }
export PYTHONUNBUFFERED=1
# DeepSpeed JIT-builds cpu_adam with ninja: make the one beside this python findable
pybin=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null || true)
ninjabin=$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null || true)
export PATH="${ninjabin:+$ninjabin:}${pybin:+$pybin:}$PATH"

# copy_new SRC DEST: DEST replaced whole (a temp copy beside it, then a rename), never SRC itself
copy_new() { [ "$1" -ef "$2" ] || { cp "$1" "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"; }; }
save_out() {
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    [ -f "$out" ] && copy_new "$out" "$OUT/$(basename "$out")"
    copy_new "$log_all" "$OUT/$(basename "$out" .jsonl).log"
  fi
}

# --- wheels carried in .whl/ (fetch_wheels.sh) ------------------------------------
if ! python3 -c "import deepspeed" >/dev/null 2>&1 && [ -d .whl ]; then
  site=/tmp/peers_site
  say "installing .whl/ into $site"
  shopt -s nullglob
  whls=(.whl/*.whl) sdists=(.whl/deepspeed-*.tar.gz)
  shopt -u nullglob
  if [ ${#whls[@]} -gt 0 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "${whls[@]}" >>"$log_all" 2>&1 || say "WARNING: pip install of .whl/*.whl failed (see log)"
  fi
  if [ ${#sdists[@]} -gt 0 ]; then
    DS_BUILD_OPS=0 python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
      --target "$site" "${sdists[0]}" >>"$log_all" 2>&1 || say "WARNING: building deepspeed from its sdist failed (see log)"
  fi
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 - <<'EOF' 2>&1 | tee -a "$log_all" >&2
import importlib, sys
for m in ("torch", "transformers", "deepspeed", "pydantic", "hjson"):
    try:
        v = getattr(importlib.import_module(m), "__version__", "?")
        print("run_peers: %s %s" % (m, v))
    except Exception as e:  # noqa: BLE001
        print("run_peers: %s not importable (%s)" % (m, e))
import torch
print("run_peers: cuda available %s, device %s" % (torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-"))
EOF

model=$(basename "$config" .json)
layers_run=${layers:-null}
n_runs=0 n_fail=0 i=0
total=$(( $(echo $peers | wc -w) * $(echo $batches | wc -w) ))
for peer in $peers; do
  for b in $batches; do
    i=$((i + 1))
    say "[$i/$total] $peer model $model batch $b seq $seq layers ${layers:-all} (timeout ${tmo}s)"
    errf=$(mktemp /tmp/run_peers.err.XXXXXX)
    t0=$(date +%s)
    # "official" is megatrain_official.py (the official code, laid out by official_prepare.sh)
    script=$peer system=$peer
    [ "$peer" = official ] && script=megatrain_official system=megatrain_official
    args=(--config "$config" --batch "$b" --seq-len "$seq" --steps "$steps" --warmup "$warmup"
          --out "$out" --experiment "$experiment")
    [ -n "$layers" ] && args+=(--layers "$layers")
    pextra=("${extra[@]}")
    [ "$peer" = official ] && pextra=()  # the torch peers' flags (--ds-*, --adam) are not its
    timeout "$tmo" python3 -m "baselines.peers.$script" "${args[@]}" "${pextra[@]}" \
      2> >(tee -a "$log_all" "$errf" >&2) >>"$log_all"
    rc=$?
    sleep 1  # let the tee of stderr finish
    dt=$(( $(date +%s) - t0 ))
    if [ $rc -eq 77 ] && [ "$peer" = official ]; then
      say "[$i/$total] $peer skipped ($(grep -m1 -o 'skipped: .*' "$errf"))"
    elif [ $rc -eq 0 ]; then
      n_runs=$((n_runs + 1))
      say "[$i/$total] $peer batch $b done in ${dt}s"
    else
      n_runs=$((n_runs + 1)) n_fail=$((n_fail + 1))
      if [ $rc -eq 124 ]; then
        msg="timeout after ${tmo}s"
      else
        # the peer's one clear line, else the last line it printed
        msg=$(grep -E "^(fsdp2_offload|deepspeed_zero3|megatrain_official): " "$errf" | tail -1)
        [ -n "$msg" ] || msg=$(grep -v '^[[:space:]]*$' "$errf" | tail -1)
        msg="exit $rc: ${msg:-no output}"
      fi
      say "[$i/$total] $peer batch $b FAILED in ${dt}s: $msg"
      ERR_MSG="$msg" python3 - "$out" "$experiment" "$system" "$model" "$b" "$seq" "$layers_run" <<'EOF'
import os, sys
from baselines.peers import common
out, exp, system, model, b, seq, lr = sys.argv[1:8]
common.append_jsonl(out, common.error_row(
    experiment=exp, system=system, model=model, batch=int(b), seq_len=int(seq),
    layers_run=None if lr == "null" else int(lr), error=os.environ["ERR_MSG"]))
EOF
    fi
    rm -f "$errf"
    save_out
  done
done
say "$n_runs run(s), $n_fail failed; rows in $out"
save_out
[ $n_fail -eq 0 ]
