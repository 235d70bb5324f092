#!/usr/bin/env bash
# --save / --resume continue bit-identically on the CPU backend: an interrupted
# run (by a saved step or by SIGINT) resumed to N steps ends with the same
# parameters, moments and losses as an uninterrupted run to N.
source "$(dirname "$0")/lib.sh"

# Constant lr here: a cosine schedule's horizon is --steps, so a 3-step run is not the
# first half of a 6-step run. The SIGINT case below covers cosine.
# --speculative-step true: at clip 1.0 every step clips, so auto would speculate in step 1 only, and
# there the running norm passes the clip before the last layer's gradient is in (the head, which
# once went first, is never speculated): true speculates steps 4..6, each rolled back.
common=(--data $FIX/tokens.bin --batch 2 --seq-len 32 --grad-accum 2 --lr 2e-3 --warmup 2 --backend cpu
        --speculative-step true)
losses() { jq -r '"\(.step) \(.loss) \(.grad_norm)"' "$1"; }

for prec in fp32 paper mixed; do
  full=$TMP/full_$prec half=$TMP/half_$prec res=$TMP/res_$prec
  "$MT" train --model $FIX/tiny_llama --precision $prec "${common[@]}" --steps 6 --save "$full" > "$full.jsonl" 2>/dev/null
  check "full run ($prec)" test $? -eq 0
  "$MT" train --model $FIX/tiny_llama --precision $prec "${common[@]}" --steps 3 --save "$half" > "$half.jsonl" 2>/dev/null
  check "first half ($prec)" test $? -eq 0
  check "train_state.json step 3 ($prec)" test "$(jq .step "$half/train_state.json")" = 3
  "$MT" train --resume "$half" --steps 6 --save "$res" > "$res.jsonl" 2>/dev/null
  check "resume needs no --model ($prec)" test $? -eq 0
  check "resumed steps are 4..6 ($prec)" test "$(jq -s -c 'map(.step)' "$res.jsonl")" = "[4,5,6]"
  check "losses of steps 4..6 identical ($prec)" test "$(losses "$res.jsonl")" = "$(losses "$full.jsonl" | tail -n 3)"
  check "weights bitwise ($prec)" cmp -s "$full/model.safetensors" "$res/model.safetensors"
  check "moments bitwise ($prec)" cmp -s "$full/optimizer.safetensors" "$res/optimizer.safetensors"
  # These runs speculated and (clip 1.0) rolled back.
  check "speculated and rolled back ($prec)" test "$(jq -s '(map(.spec_units) | add > 0) and (map(.rollbacks) | add > 0)' "$full.jsonl")" = true
done

# SIGINT mid-run with a cosine schedule: the step in flight finishes, the state is
# saved, exit 130, nothing partial; resuming to the same total matches an
# uninterrupted run exactly, whichever step the signal landed on.
cos=(--config $DATA/tiny5_llama.json --seed 3 --data synthetic --batch 4 --seq-len 64 --lr 1e-3
     --lr-schedule cosine --warmup 5 --steps 200 --precision fp32 --backend cpu)
ref=$TMP/sigref sig=$TMP/sig
"$MT" train "${cos[@]}" --save "$ref" > "$ref.jsonl" 2>/dev/null
check "uninterrupted cosine run" test $? -eq 0
"$MT" train "${cos[@]}" --save "$sig" > "$sig.jsonl" 2>"$sig.err" &
pid=$!
for _ in $(seq 100); do [ -s "$sig.jsonl" ] && break; sleep 0.1; done
sleep 0.3
kill -INT $pid
wait $pid
check "SIGINT exits 130" test $? -eq 130
k=$(jq .step "$sig/train_state.json")
check "SIGINT saved the last completed step ($k)" test "$k" = "$(tail -n 1 "$sig.jsonl" | jq .step)"
check "interrupted before the end" test "$k" -lt 200
check "no temporary files left" test -z "$(find "$sig" -name '*.tmp')"
"$MT" train --resume "$sig" --steps 200 --save "$sig" > "$sig.res.jsonl" 2>/dev/null
check "resume after SIGINT continues at step $((k + 1))" test "$(head -n 1 "$sig.res.jsonl" | jq .step)" = $((k + 1))
check "resumed losses match the uninterrupted run" test "$(losses "$sig.res.jsonl")" = "$(losses "$ref.jsonl" | tail -n $((200 - k)))"
check "resumed weights match bitwise" cmp -s "$ref/model.safetensors" "$sig/model.safetensors"
finish
