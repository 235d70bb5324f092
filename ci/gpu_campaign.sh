#!/usr/bin/env bash
# gpu_campaign.sh: every GPU figure of this project, measured in parts that fit the lent
# GPU machine (one call of the device tool each: a bare machine, at most 10 minutes a
# command, 8 files back), and the same parts as a CPU dry run (CI runs every one).
#
#   bash ci/gpu_campaign.sh --list [--detail]     the parts in priority order, one line each:
#                                                 name, estimated GPU minutes (start included),
#                                                 what it measures (--detail: per step, and how
#                                                 each figure is derived)
#   bash ci/gpu_campaign.sh PART [--only STEP,..] [--budget S]   on the GPU machine, from the repo
#                                                 root, with the bundle carried (.device, and .whl for
#                                                 part B): runs the part, packs it into at most 8 files
#                                                 in $OUT; --budget: S seconds for the steps instead of
#                                                 510 (when the session has less device time left)
#   bash ci/gpu_campaign.sh --dry-run PART [--out DIR] [--only ..] [--budget S]   the same part here on the CPU (cpu backend,
#                                                 tiny sizes; GPU-only steps, torch and the peers
#                                                 skipped with one line each), the same files in DIR
#                                                 (default $OUT, else gpu_campaign_out/PART)
#   bash ci/gpu_campaign.sh next [--budget S]     on the GPU machine: the highest-priority parts not yet
#                                                 filed for this GPU (results/campaign/) that fit S seconds
#                                                 (default 540), at most 2, each packed in $OUT/PART;
#                                                 a filed part is completed: its sweeps' configurations
#                                                 without a row from this GPU, its microbench when the
#                                                 filed run lacks a family it now runs
#   bash ci/gpu_campaign.sh --next-plan GPU [--budget S]   here: what `next` would run on that GPU
#   bash ci/gpu_campaign.sh --check DIR           a part's folder: the device tool's limits, the
#                                                 manifest, every results row
#   bash ci/gpu_campaign.sh --file DIR...         here, on what came back (the device tool's
#                                                 files_at): rows into results/ (file_rows.py),
#                                                 calibrated profiles into experiments/hardware/
#                                                 (--replace-gpu: rows from this GPU may replace
#                                                 filed rows of their configuration from another)
#   bash ci/gpu_campaign.sh --regenerate          here, after committing what --file wrote: the
#                                                 projections on the calibrated profiles, figures,
#                                                 claims table, README/REPRODUCE blocks
# Before a GPU session, here: `bash ci/gpu_bundle.sh` (the CUDA build, .device/bundle.tar.xz)
# and, for part B, `bash baselines/peers/fetch_wheels.sh` (.whl/) and `bash baselines/peers/official_prepare.sh`
# (.official/). The device tool's call:
#   run(command="bash ci/gpu_campaign.sh A", carry=[".device", ".whl", ".official"], timeout_s=600)
# REPRODUCE.md ("GPU path") has the whole procedure. The parts themselves are in
# ci/gpu_campaign/parts.py; the runner, packing and filing beside it (Python, stdlib only).
set -uo pipefail
export MT_CAMPAIGN_T0=${MT_CAMPAIGN_T0:-$(date +%s.%N)}
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
PY=${PYTHON:-python3}
M=ci.gpu_campaign.main  # run as a module from the repo root (above)
usage() { sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }

case "$1" in
  -h|--help) usage; exit 0 ;;
  --list) shift; exec "$PY" -m "$M" list "$@" ;;
  --next-plan) [ $# -ge 2 ] || { echo "gpu_campaign: --next-plan GPU-NAME [--budget S]" >&2; exit 2; }
               gpu=$2; shift 2; exec "$PY" -m "$M" next --plan-only --gpu "$gpu" "$@" ;;
  --check) [ $# = 2 ] || { echo "gpu_campaign: --check DIR" >&2; exit 2; }; exec "$PY" -m "$M" check "$2" ;;
  --file) shift; [ $# -ge 1 ] || { echo "gpu_campaign: --file DIR..." >&2; exit 2; }; exec "$PY" -m "$M" file "$@" ;;
  --regenerate) exec "$PY" -m "$M" regenerate ;;
  --dry-run)
    [ $# -ge 2 ] || { echo "gpu_campaign: --dry-run PART [--out DIR]" >&2; exit 2; }
    part=$2; shift 2
    out=${OUT:-$ROOT/gpu_campaign_out/$part}
    extra=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        --only) extra+=(--only "${2:?--only needs step names}"); shift 2 ;;
        --budget) extra+=(--budget "${2:?--budget needs seconds}"); shift 2 ;;
        *) echo "gpu_campaign: unknown argument '$1'" >&2; exit 2 ;;
      esac
    done
    export MT_BIN=${MT_BIN:-$ROOT/build/bin}
    [ -x "$MT_BIN/megatrain" ] || { echo "gpu_campaign: $MT_BIN/megatrain not found; HINT: make build" >&2; exit 2; }
    [ "$part" = next ] && exec "$PY" -m "$M" next --dry-run --out "$out" "${extra[@]}"
    exec "$PY" -m "$M" run "$part" --dry-run --out "$out" "${extra[@]}" ;;
  -*) echo "gpu_campaign: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac

# ---- a part, on the GPU machine ---------------------------------------------------------
part=$1; shift
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) extra+=(--only "${2:?--only needs step names}"); shift 2 ;;
    --budget) case "${2:-}" in ''|0*|*[!0-9]*) echo "gpu_campaign: --budget needs seconds" >&2; exit 2 ;; esac
              extra+=(--budget "$2"); shift 2 ;;
    *) echo "gpu_campaign: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$ROOT/gpu_campaign_out/$part}
if [ ! -f .device/bundle.tar.xz ]; then
  echo "gpu_campaign: .device/bundle.tar.xz missing: run 'bash ci/gpu_bundle.sh' here first and carry .device" >&2
  exit 2
fi
BUNDLE=/tmp/mt_bundle
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE" && tar -C "$BUNDLE" --strip-components=1 -xJf .device/bundle.tar.xz || exit 1
# What follows until the part starts goes to stderr and to the part's logs (prelude.log):
# where CUDA's libraries came from, the bundle's commit.
export MT_CAMPAIGN_PRELUDE=$BUNDLE/prelude.log
{
  # CUDA's own libraries come from the machine's toolkit, else PyTorch's nvidia wheels.
  export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  . ci/gpu_campaign/cuda_libs.sh
  mt_find_cuda_libs "$BUNDLE/bin/megatrain" "$PY"
  # The rows name the commit the bundle was built from; a carried tree that is not that
  # commit (tracked files edited since) makes them dirty, and file_rows.py refuses dirty rows.
  export MT_BIN=$BUNDLE/bin MT_GIT_SHA=$(cat "$BUNDLE/GIT_SHA") MT_GIT_DIRTY=$(cat "$BUNDLE/GIT_DIRTY")
  if [ -f "$BUNDLE/TREE" ]; then
    export MT_TREE_CHECK=$("$PY" -m "$M" tree-check "$BUNDLE/TREE")
    case "$MT_TREE_CHECK" in 0) ;; *) MT_GIT_DIRTY=1; echo "gpu_campaign: WARNING: $MT_TREE_CHECK: rows count as dirty" ;; esac
  fi
  echo "gpu_campaign: bundle $MT_GIT_SHA (dirty $MT_GIT_DIRTY), $(du -sh "$BUNDLE" | cut -f1) unpacked in $BUNDLE"
} 2> "$MT_CAMPAIGN_PRELUDE" 1>&2
cat "$MT_CAMPAIGN_PRELUDE" >&2
[ "$part" = next ] && exec "$PY" -m "$M" next --out "$OUT" "${extra[@]}"
exec "$PY" -m "$M" run "$part" --out "$OUT" "${extra[@]}"
