#!/usr/bin/env bash
# `megatrain eval`: the loss of the first window equals the training loss of
# step 1 (same forward, before any update); without --steps it covers the file.
source "$(dirname "$0")/lib.sh"

args=(--model $FIX/tiny_qwen3 --data $FIX/tokens.bin --batch 2 --seq-len 32 --backend cpu --precision fp32)
ev=$("$MT" eval "${args[@]}" --steps 1 2>/dev/null)
check "eval exits 0" test $? -eq 0
tr=$("$MT" train "${args[@]}" --steps 1 2>/dev/null)
check "eval loss of window 1 == train loss of step 1" test "$(jq .loss <<< "$ev")" = "$(jq .loss <<< "$tr")"
check "eval reports its tokens" test "$(jq .tokens <<< "$ev")" = 64
all=$("$MT" eval "${args[@]}" 2>/dev/null)
check "eval covers every full window of the file by default (8192 tokens -> 127 x 64)" test "$(jq .tokens <<< "$all")" = 8128
check "eval loss is near ln(256) for a random-init model" jq -e '.loss > 5.0 and .loss < 6.0' <<< "$all"
finish
