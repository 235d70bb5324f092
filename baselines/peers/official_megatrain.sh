#!/usr/bin/env bash
# official_megatrain.sh: runs the official MegaTrain code (arXiv 2604.05091's own
# PyTorch engine) from a checkout you provide, and records its step times in our
# results schema. A thin wrapper: it does not know or guess the official CLI.
#
#   MEGATRAIN_OFFICIAL=/path/to/checkout \
#   MEGATRAIN_OFFICIAL_CMD='python examples/sft/train.py --config my_qwen14b.yaml' \
#     bash baselines/peers/official_megatrain.sh --config experiments/models/qwen2.5-14b.json \
#          --batch 16 --seq-len 1024 [--layers N] [--out results/peers.jsonl]
#
# MEGATRAIN_OFFICIAL      the checkout; unset: prints "skipped: set MEGATRAIN_OFFICIAL", exit 77.
# MEGATRAIN_OFFICIAL_CMD  the command line to run inside it (bash -c, cwd = the checkout).
#                         It must train the same model shape, batch, sequence length and
#                         depth as the flags given here: this wrapper cannot check that.
#                         The command sees MT_CONFIG (absolute path), MT_BATCH, MT_SEQ_LEN,
#                         MT_LAYERS (empty = all) in its environment to template from.
# MEGATRAIN_OFFICIAL_TIMEOUT  seconds (default 3000).
#
# What is parsed (official_parse.py): per-step lines carrying "step"/"iter" and a time
# ("time: 1.23s", "step_time=1234ms", "1.2 s/it"), and "TFLOPS" figures. The first
# --warmup (2) step times are dropped; tflops/mfu are recomputed with our 6*N_all
# formula from --config, so the row compares with ours; the log's own TFLOPS is shown
# beside ours on stderr. precision is "paper" (REFERENCE.md: bf16 weights and
# gradients + fp32 moments); peak_gpu_bytes/peak_host_bytes are null (not measured
# from outside). The full log is kept in $OUT (if set) or results/official_<utc>.log.
#
# Exit: 0 row written; 77 skipped; 2 bad usage; otherwise the official command's or
# the parser's failure status.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${MEGATRAIN_OFFICIAL:-}" ]; then
  echo "skipped: set MEGATRAIN_OFFICIAL"
  exit 77
fi

config="" batch="" seq="" layers="" out="" warmup=2 experiment=peers
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=${2:-}; shift 2 ;;
    --batch) batch=${2:-}; shift 2 ;;
    --seq-len) seq=${2:-}; shift 2 ;;
    --layers) layers=${2:-}; shift 2 ;;
    --out) out=${2:-}; shift 2 ;;
    --warmup) warmup=${2:-}; shift 2 ;;
    --experiment) experiment=${2:-}; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "official_megatrain: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -d "$MEGATRAIN_OFFICIAL" ] || { echo "official_megatrain: MEGATRAIN_OFFICIAL=$MEGATRAIN_OFFICIAL is not a directory" >&2; exit 2; }
[ -n "${MEGATRAIN_OFFICIAL_CMD:-}" ] || {
  echo "official_megatrain: set MEGATRAIN_OFFICIAL_CMD to the command that trains the same configuration inside $MEGATRAIN_OFFICIAL" >&2; exit 2; }
[ -n "$config" ] && [ -n "$batch" ] && [ -n "$seq" ] || {
  echo "official_megatrain: --config, --batch and --seq-len are required (they describe the row)" >&2; exit 2; }
[ -r "$config" ] || { echo "official_megatrain: $config: cannot read" >&2; exit 2; }

stamp=$(date -u +%Y%m%dT%H%M%SZ)
logdir=${OUT:-$root/results}
mkdir -p "$logdir"
logf="$logdir/official_$stamp.log"
cfg_abs=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
echo "official_megatrain: running in $MEGATRAIN_OFFICIAL: $MEGATRAIN_OFFICIAL_CMD (log $logf)" >&2
(
  cd "$MEGATRAIN_OFFICIAL" &&
  MT_CONFIG="$cfg_abs" MT_BATCH="$batch" MT_SEQ_LEN="$seq" MT_LAYERS="$layers" \
    timeout "${MEGATRAIN_OFFICIAL_TIMEOUT:-3000}" bash -c "$MEGATRAIN_OFFICIAL_CMD"
) 2>&1 | tee "$logf" >&2
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "official_megatrain: the official command exited $rc (log $logf)" >&2
  exit "$rc"
fi
args=(--log "$logf" --config "$config" --batch "$batch" --seq-len "$seq" --warmup "$warmup"
      --experiment "$experiment")
[ -n "$layers" ] && args+=(--layers "$layers")
[ -n "$out" ] && args+=(--out "$out")
exec python3 "$here/official_parse.py" "${args[@]}"
