#!/usr/bin/env bash
# fetch_wheels.sh: run HERE (a machine with PyPI), from anywhere in the repo.
# Puts into <repo>/.whl/ (git-ignored) the Python packages the GPU machine lacks
# for the peers, as wheels for its Python (3.12, manylinux x86_64):
#
#   deepspeed      PyPI ships only an sdist; it is built here into a pure-Python
#                  py3-none-any wheel with DS_BUILD_OPS=0 (no op compiled ahead;
#                  cpu_adam is JIT-built on the GPU machine at first use). Needs
#                  torch importable here for setup.py. If that build fails, the
#                  sdist is kept in .whl/ instead and run_peers.sh installs it there
#                  with `pip install --no-build-isolation --no-deps` (setuptools and
#                  torch are there).
#   hjson, pydantic (+ pydantic-core, annotated-types, typing-inspection,
#   typing-extensions: pydantic's own requirements, resolved together here)
#
# Everything else DeepSpeed and transformers need is already in the GPU
# machine's image (docs/REFERENCE.md#the-lent-gpu-machine lists torch 2.11,
# transformers 5.17, ninja, py-cpuinfo, psutil, msgpack, einops, numpy, tqdm,
# packaging, nvidia-ml-py). Prints the total size (the carry limit is 64 MiB).
#
#   bash baselines/peers/fetch_wheels.sh            # default versions below
#   DEEPSPEED_VERSION=0.19.8 bash baselines/peers/fetch_wheels.sh
set -euo pipefail

DEEPSPEED_VERSION=${DEEPSPEED_VERSION:-0.19.8}
PYDANTIC_VERSION=${PYDANTIC_VERSION:-2.14.3}
HJSON_VERSION=${HJSON_VERSION:-3.1.0}
PY=${PYTHON:-python3}

root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$root/.whl"
mkdir -p "$dest"
plat=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux1_x86_64)

echo "fetch_wheels: pydantic==$PYDANTIC_VERSION (+ its requirements), hjson==$HJSON_VERSION" >&2
"$PY" -m pip download -q "${plat[@]}" -d "$dest" "pydantic==$PYDANTIC_VERSION" "hjson==$HJSON_VERSION"

if ls "$dest"/deepspeed-"$DEEPSPEED_VERSION"-py3-none-any.whl >/dev/null 2>&1; then
  echo "fetch_wheels: deepspeed $DEEPSPEED_VERSION wheel already there" >&2
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch_wheels: deepspeed==$DEEPSPEED_VERSION (sdist only on PyPI; building a py3-none-any wheel)" >&2
  "$PY" -m pip download -q --no-deps --no-binary :all: -d "$tmp" "deepspeed==$DEEPSPEED_VERSION"
  sdist=$(ls "$tmp"/deepspeed-*.tar.gz)
  if DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$tmp/out" "$sdist" >"$tmp/build.log" 2>&1 \
     && ls "$tmp"/out/deepspeed-*-py3-none-any.whl >/dev/null 2>&1; then
    cp "$tmp"/out/deepspeed-*-py3-none-any.whl "$dest"/
  else
    echo "fetch_wheels: building the deepspeed wheel here failed (last lines below); keeping the sdist," >&2
    echo "  run_peers.sh installs it on the GPU machine with --no-build-isolation" >&2
    tail -5 "$tmp/build.log" >&2 || true
    cp "$sdist" "$dest"/
  fi
fi

# one version of each package, or pip refuses the whole install there
dups=$(ls "$dest" | sed -E 's/^([A-Za-z0-9_.]+)-[0-9].*/\1/' | tr 'A-Z-' 'a-z_' | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "fetch_wheels: more than one version in $dest of: $dups (remove the older)" >&2
  exit 1
fi
ls -l "$dest" >&2
bytes=$(du -cb "$dest"/* | tail -1 | cut -f1)
echo "fetch_wheels: $(ls "$dest" | wc -l) files, $bytes bytes ($(( (bytes + 1048575) / 1048576 )) MiB) in $dest"
if [ "$bytes" -gt $((60 * 1048576)) ]; then
  echo "fetch_wheels: WARNING: over 60 MiB, close to the 64 MiB carry limit" >&2
fi
