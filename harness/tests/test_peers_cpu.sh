#!/usr/bin/env bash
# The peers' own CPU tests (baselines/peers/tests: the runners' rows, the official code's
# launcher, parser and files, FSDP2 and plain torch at tiny size on the CPU, DeepSpeed where it
# imports) in CTest, so that a broken import, a wrong flag or a parser mismatch fails here and
# not in a GPU lease. The python: MT_PEERS_PYTHON, else the peers' venv, else CI's hf-venv
# (ci/install_hf_python.sh), else python3 — the first that imports torch, numpy and
# transformers; without one the test is skipped (77), saying so.
. "$(dirname "$0")/lib.sh" bins
cache=${XDG_CACHE_HOME:-$HOME/.cache}/megatrain
PY=""
for p in "${MT_PEERS_PYTHON:-}" "$cache/peers-venv/bin/python" "$cache/hf-venv/bin/python" python3; do
  if [ -n "$p" ] && "$p" -c "import torch, numpy, transformers" > /dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "skipped: no python here imports torch, numpy and transformers"; exit 77; }
echo "python: $PY ($("$PY" -c 'import torch; print("torch", torch.__version__)'))"
if "$PY" -m unittest discover -s baselines/peers/tests -t . > "$tmp/log" 2>&1; then
  pass "baselines/peers/tests: $(grep -E '^Ran [0-9]+ tests' "$tmp/log") ($(tail -1 "$tmp/log"))"
else
  fail "baselines/peers/tests"; grep -E -A12 '^(FAIL|ERROR):' "$tmp/log" | head -60; tail -3 "$tmp/log"
fi
finish
