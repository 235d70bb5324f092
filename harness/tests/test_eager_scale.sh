#!/usr/bin/env bash
# The peers' eager_scale (megatrain/engine/schedule.c: HF's model in eager PyTorch against our
# kernels) is what baselines/peers/derive_eager_scale.py derives from the measured DeepSpeed
# rows, not a number chosen to meet a step: the constant the plan reports is re-derived here
# from results/gpu_c2_deepspeed.jsonl and the sim on h200-128g, and must agree to 3 decimals.
# The derivation uses the forward phase only; its backward prediction and the sim's whole
# steps are printed beside the measured ones (the out-of-sample check, not gated: a model).
. "$(dirname "$0")/lib.sh" jq python3 bins
cfg=$tmp/q14.json
jq '.num_hidden_layers = 8 | .max_window_layers = 8' experiments/models/qwen2.5-14b.json > "$cfg"
scale=$("$MT_BIN/megatrain" plan --config "$cfg" --batch 16 --seq-len 1024 --precision mixed --hardware h200-128g \
  --peer deepspeed-zero3 | jq -r .peer.eager_scale)
fsdp=$("$MT_BIN/megatrain" plan --config "$cfg" --batch 16 --seq-len 1024 --precision mixed --hardware h200-128g \
  --peer fsdp2-offload | jq -r .peer.eager_scale)
official=$("$MT_BIN/megatrain" plan --config "$cfg" --batch 16 --seq-len 1024 --precision paper --hardware h200-128g \
  --peer official | jq -r .peer.eager_scale)
[ "$fsdp" = "$scale" ] && [ "$official" = 1 ] && pass "DeepSpeed and FSDP2 (the same HF model build) carry $scale, the official code 1" ||
  fail "eager_scale: deepspeed $scale, fsdp2 $fsdp, official $official"
out=$(python3 -m baselines.peers.derive_eager_scale --check "$scale" 2> "$tmp/err"); rc=$?
[ "$rc" = 0 ] && pass "derived from the rows: $out" || { fail "derive --check $scale: exit $rc"; cat "$tmp/err"; echo "$out"; }
exits 1 "a constant the rows do not derive is refused" python3 -m baselines.peers.derive_eager_scale --check 1.0
printf '%s\n' '{"system": "deepspeed_zero3", "batch": 16, "fwd_ms": 1}' > "$tmp/one.jsonl"
exits 2 "rows at one batch only: no slope" python3 -m baselines.peers.derive_eager_scale --rows "$tmp/one.jsonl"
finish
