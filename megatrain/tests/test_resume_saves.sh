#!/usr/bin/env bash
# A resume keeps what it trains (issue 40): `train --resume DIR --steps N` without
# --save saves back to DIR at the end (and at --save-every), saying so on stderr; it
# used to train the steps and throw them away. --save OTHER saves there instead.
source "$(dirname "$0")/lib.sh"
run=(--model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
ck=$TMP/ck

"$MT" train "${run[@]}" --steps 4 --save "$TMP/ref" > "$TMP/ref.jsonl" 2>/dev/null
check "the uninterrupted 4-step run" test $? -eq 0
"$MT" train "${run[@]}" --steps 2 --save "$ck" > /dev/null 2>&1
check "a checkpoint at step 2" test "$(jq .step "$ck/checkpoint.json")" = 2

"$MT" train --resume "$ck" --steps 4 > "$TMP/res.jsonl" 2> "$TMP/err"
check "resume without --save: exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
check "it says on stderr that it saves back to DIR" grep -qF -- "--resume $ck: saving back to it at the end" "$TMP/err"
check "it trains steps 3 and 4" test "$(jq -s -c 'map(.step)' "$TMP/res.jsonl")" = "[3,4]"
check "DIR now holds step 4" test "$(jq .step "$ck/checkpoint.json")" = 4
check "... the uninterrupted run's state, bitwise" same_state "$TMP/ref" "$ck"

# --save OTHER: saved there; DIR stays as it was.
"$MT" train --resume "$ck" --steps 6 --save "$TMP/other" > /dev/null 2> "$TMP/err"
check "resume --save OTHER: exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
check "OTHER holds step 6" test "$(jq .step "$TMP/other/checkpoint.json")" = 6
check "DIR still holds step 4" test "$(jq .step "$ck/checkpoint.json")" = 4
check "no 'saving back' note with --save" test "$(grep -c 'saving back' "$TMP/err")" -eq 0

# --save-every without --save applies to DIR (it used to be refused: "needs --save DIR").
"$MT" train --resume "$ck" --steps 6 --save-every 1 > /dev/null 2> "$TMP/err"
check "resume --save-every 1 without --save: exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
check "... said on stderr" grep -qF "saving back to it at the end and every --save-every steps" "$TMP/err"
check "DIR holds step 6, the same state as --save OTHER's" same_state "$TMP/other" "$ck"
expect 0 "nothing to train" train --resume "$ck" --steps 6
finish
