#!/usr/bin/env bash
# baselines/peers/stage3_hooks.py runs end to end, small (depths 1 and 3, 3 rounds of 3
# steps): DeepSpeed ZeRO-3 with offload_param on its CPU accelerator and FSDP2 with
# CPUOffloadPolicy on a CPU mesh, each against plain torch. Its rows are well formed, the
# fetches it counts are the frameworks' own (DeepSpeed's forward fetches each module of a
# layer once, FSDP2 each layer once, the backward more), and each figure is finite and
# inside the min..max of its rounds. Its sign is not checked: it is a difference of
# differences of timings, and on CI's 2 shared cores FSDP2's small hook cost fell below
# the noise once (-0.35 ms); timings are never gated here.
# Needs torch, DeepSpeed and transformers: a python that imports them is taken from
# MT_PEERS_PYTHON, else ~/.cache/megatrain/peers-venv (made by hand: baselines/peers/README.md),
# else python3; without one the test is skipped (77), saying so (CI does not install DeepSpeed).
. "$(dirname "$0")/lib.sh" jq
venv_py="${XDG_CACHE_HOME:-$HOME/.cache}/megatrain/peers-venv/bin/python"
PY=""
for p in "${MT_PEERS_PYTHON:-}" "$venv_py" python3; do
  if [ -n "$p" ] && "$p" -c "import torch, deepspeed, transformers" > /dev/null 2>&1; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  echo "test_peer_hooks_run: skipped: no python here imports torch, deepspeed and transformers" \
       "(MT_PEERS_PYTHON, $venv_py, python3)"
  exit 77
fi

start=$(date +%s)
"$PY" -m baselines.peers.stage3_hooks --depths 1,3 --rounds 3 --steps 3 --warmup 1 --out "$tmp/h.jsonl" \
  > "$tmp/out.jsonl" 2> "$tmp/err"; rc=$?
echo "stage3_hooks.py (small): exit $rc in $(( $(date +%s) - start )) s ($PY)"
[ "$rc" = 0 ] || { echo "FAIL exit $rc: $(grep -v '^\[20\|[Ww]arn' "$tmp/err" | tail -n 5)"; exit 1; }
cmp -s "$tmp/out.jsonl" "$tmp/h.jsonl" && echo "ok   stdout carries the rows it wrote" || fail "stdout and --out differ"
if jq -s -e '
  length == 4 and all(.[]; .schema == "megatrain.peer_hooks/1" and .rounds == 3 and .model.depths == [1, 3]
    and (.fetch_overhead_ms | isinfinite | not) and (.fetch_overhead_ms | isnan | not)
    and .calls_per_step["3"] - .calls_per_step["1"] == 2 * .calls_per_layer)
  and ([.[] | select(.system == "deepspeed-zero3" and .pass == "fwd") | .calls_per_layer == .modules_per_layer] == [true])
  and ([.[] | select(.system == "fsdp2-offload" and .pass == "fwd") | .calls_per_layer] == [1])
  and all(.[]; .fetch_overhead_ms_range[0] <= .fetch_overhead_ms and .fetch_overhead_ms <= .fetch_overhead_ms_range[1])
  and all(.[] | select(.pass == "fwd_bwd"); .calls_per_layer > 1)
  ' "$tmp/h.jsonl" > /dev/null; then
  echo "ok   $(jq -s -r 'map("\(.system) \(.pass) \(.fetch_overhead_ms * 1000 | round) us/fetch, \(.calls_per_layer) calls/layer") | join("; ")' "$tmp/h.jsonl")"
else
  fail "rows: $(jq -s -c 'map({system, pass, fetch_overhead_ms, calls_per_layer, modules_per_layer, calls_per_step})' "$tmp/h.jsonl")"
fi
finish
