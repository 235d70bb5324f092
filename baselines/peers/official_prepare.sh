#!/usr/bin/env bash
# official_prepare.sh: run HERE (a machine with git, and PyPI for the wheels).
# Lays the pinned commit of the official MegaTrain code (DLYuanGod/MegaTrain) into
# <repo>/.official/ (git-ignored), which travels to the GPU machine as a carry path
# and is run there by megatrain_official.py. Nothing of it enters our repository.
#
#   bash baselines/peers/official_prepare.sh
#
# .official/src/     the files examples/sft/train.py needs at that commit: infinity/
#                    (the engine, without its prebuilt aarch64 build/ folders, egg-info,
#                    __pycache__ and the cuda_pipeline extension, which train.py never
#                    imports), examples/sft/train.py, one example YAML, LICENSE, README.md
# .official/COMMIT   the 40-hex commit
# .official/wheels/  what the official code imports and the GPU image lacks: datasets
#                    (its data loader) and datasets' own needs missing there (dill,
#                    multiprocess). DeepSpeed (its CPU Adam) comes from .whl/
#                    (fetch_wheels.sh), carried beside it.
#
# Source of the commit: `git clone` of $MT_OFFICIAL_URL when it answers, else the bare
# mirror $MT_OFFICIAL_MIRROR (default /work/.mirror/DLYuanGod+MegaTrain/repo). Neither
# holding the commit: one line, exit 1. Idempotent: a .official/ at the same commit
# with its wheels is left as it is (MT_OFFICIAL_FORCE=1 rebuilds it).
# MT_OFFICIAL_DEST: another destination (the tests); MT_OFFICIAL_WHEELS="": no wheels.
set -euo pipefail

COMMIT=919520f07182c0d4d3e9765b2f915702e71c11a4   # HEAD of the mirror, 2026-04-18
URL=${MT_OFFICIAL_URL:-https://github.com/DLYuanGod/MegaTrain}
MIRROR=${MT_OFFICIAL_MIRROR:-/work/.mirror/DLYuanGod+MegaTrain/repo}
# datasets 5.2.0 with the dill and multiprocess versions it accepts; the rest of its
# needs (pyarrow, pandas, xxhash, fsspec, huggingface-hub, ...) are in the GPU image.
WHEELS=${MT_OFFICIAL_WHEELS-"datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19"}
PY=${PYTHON:-python3}

root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${MT_OFFICIAL_DEST:-$root/.official}
die() { echo "official_prepare: $*" >&2; exit 1; }

have_wheels() { [ -z "$WHEELS" ] || [ -n "$(ls "$dest"/wheels/*.whl 2>/dev/null)" ]; }
if [ "${MT_OFFICIAL_FORCE:-0}" != 1 ] && [ "$(cat "$dest/COMMIT" 2>/dev/null)" = "$COMMIT" ] \
   && [ -f "$dest/src/examples/sft/train.py" ] && have_wheels; then
  echo "official_prepare: .official already at $COMMIT ($(du -sh "$dest" | cut -f1))" >&2
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A git directory that holds the commit: a fresh clone, else the mirror.
gitdir=""
if timeout 120 git clone -q --bare "$URL" "$tmp/clone.git" 2>/dev/null \
   && git --git-dir="$tmp/clone.git" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
  gitdir="$tmp/clone.git"; from="$URL"
elif git --git-dir="$MIRROR" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
  gitdir="$MIRROR"; from="mirror $MIRROR"
else
  die "commit $COMMIT of DLYuanGod/MegaTrain is neither clonable from $URL nor in $MIRROR (set MT_OFFICIAL_MIRROR)"
fi

# Subtrees one by one: the commit also holds prebuilt aarch64 objects whose blobs a
# mirror may lack; archiving only what we keep never touches them.
mkdir -p "$tmp/src"
for p in infinity examples/sft; do
  git --git-dir="$gitdir" archive --format=tar --prefix="$p/" "$COMMIT:$p" | tar -x -C "$tmp/src"
done
for f in LICENSE README.md requirements.txt; do
  git --git-dir="$gitdir" show "$COMMIT:$f" > "$tmp/src/$f"
done
# What the run does not need (train.py imports neither extension; build/ holds aarch64 .so).
rm -rf "$tmp/src/infinity/cuda_pipeline" "$tmp/src/examples/sft/configs"
find "$tmp/src" \( -name __pycache__ -o -name build -o -name '*.egg-info' \) -prune -exec rm -rf {} +
mkdir -p "$tmp/src/examples/sft/configs"
git --git-dir="$gitdir" show "$COMMIT:examples/sft/configs/qwen_7b_1gpu.yaml" \
  > "$tmp/src/examples/sft/configs/qwen_7b_1gpu.yaml"   # the paper's 1-GPU config, for reference
[ -f "$tmp/src/examples/sft/train.py" ] && [ -f "$tmp/src/infinity/model/cpu_master.py" ] \
  || die "the archive of $COMMIT lacks examples/sft/train.py or infinity/model/cpu_master.py"

mkdir -p "$tmp/wheels"
# shellcheck disable=SC2086
[ -z "$WHEELS" ] || "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$tmp/wheels" $WHEELS || die "pip download of $WHEELS failed (PyPI unreachable?)"

rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/src" "$tmp/wheels" "$dest"/
echo "$COMMIT" > "$dest/COMMIT"
echo "official_prepare: .official at $COMMIT from $from: $(find "$dest/src" -type f | wc -l) files," \
     "$(du -sh "$dest/src" | cut -f1) source, $(du -sh "$dest/wheels" | cut -f1) wheels" >&2
