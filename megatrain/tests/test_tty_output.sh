#!/usr/bin/env bash
# What a terminal shows (issue 40): with stdout on a terminal, train prints one short
# line a step and a summary there, and the JSON lines go to --log only; piped, stdout
# carries the JSON lines exactly as before; --json puts them on the terminal too.
source "$(dirname "$0")/lib.sh"
TTY="python3 $(dirname "$0")/tty_run.py"
jqok() { jq -e "$@" > /dev/null; }

args=(train --model $FIX/tiny_llama --steps 4 --batch 2 --seq-len 16 --backend cpu --seed 3)
keys='has("step") and has("loss") and has("lr") and has("grad_norm") and has("tokens") and has("step_ms")
      and has("tokens_per_s") and has("tflops")'

# Piped: every stdout line is a step's JSON object, one a step, the same lines --log gets.
"$MT" "${args[@]}" --log "$TMP/piped.jsonl" > "$TMP/piped" 2> "$TMP/err"
check "piped: exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
check "piped: 4 lines on stdout" test "$(wc -l < "$TMP/piped")" -eq 4
check "piped: each a step's JSON object with the contract's keys" jqok -se "length == 4 and all(.[]; $keys)" "$TMP/piped"
check "piped: --log holds the same lines" cmp -s "$TMP/piped" "$TMP/piped.jsonl"
check "piped: no human step line on stdout" test "$(grep -c '^step ' "$TMP/piped")" -eq 0

# A terminal: one human line a step, a summary, no JSON; --log still gets every line.
$TTY "$TMP/err" "$MT" "${args[@]}" --log "$TMP/tty.jsonl" > "$TMP/tty"
check "tty: exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
check "tty: no JSON line on the terminal ($(head -n 1 "$TMP/tty" | head -c 120))" test "$(grep -c '^{' "$TMP/tty")" -eq 0
check "tty: one human line a step ($(head -n 1 "$TMP/tty"))" \
  test "$(grep -cE '^step [0-9]/4 \| loss [0-9.]+ \| [0-9.]+ ms \| [0-9]+ tok/s \| [0-9.e+-]+ TFLOPS \| ETA [0-9:]+$' "$TMP/tty")" -eq 4
check "tty: a summary line at the end" grep -qE '^done: steps 1-4 in [0-9.]+ s \| loss [0-9.]+ -> [0-9.]+' "$TMP/tty"
check "tty: the summary says where the JSON lines went" grep -qF "JSON lines: --log $TMP/tty.jsonl" "$TMP/tty"
check "tty: --log holds the 4 JSON lines" jqok -se "length == 4 and all(.[]; $keys)" "$TMP/tty.jsonl"
check "tty: the rate-limited stderr progress is not repeated" test "$(grep -c '^step ' "$TMP/err")" -eq 0
# The same steps (seeded, cpu): the terminal's losses are the JSON's, to 4 decimals.
check "tty: the human lines' losses are the JSON's" test \
  "$(jq -r '.loss * 10000 | round / 10000 | tostring' "$TMP/tty.jsonl" | xargs printf '%.4f\n')" = \
  "$(sed -nE 's/^step [0-9]\/4 \| loss ([0-9.]+) .*/\1/p' "$TMP/tty")"

# No --log on a terminal: the summary says the JSON lines were not kept, and how to keep them.
$TTY "$TMP/err" "$MT" "${args[@]}" > "$TMP/tty"
check "tty, no --log: says the JSON lines are not kept" grep -q 'JSON lines: not kept (--log FILE.jsonl' "$TMP/tty"

# --json on a terminal: the JSON lines there, as piped; the progress stays on stderr.
$TTY "$TMP/err" "$MT" "${args[@]}" --json > "$TMP/json"
check "tty --json: exit 0" test $? -eq 0
check "tty --json: 4 JSON lines and nothing else" jqok -se "length == 4 and all(.[]; $keys)" "$TMP/json"
check "tty --json: the progress is on stderr" grep -q '^step 4/4' "$TMP/err"
check "tty --json: the same losses as piped" test "$(jq -c .loss "$TMP/json")" = "$(jq -c .loss "$TMP/piped")"

# eval on a terminal: one human line; piped: the JSON object.
eargs=(eval --model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --steps 2 --backend cpu)
$TTY "$TMP/err" "$MT" "${eargs[@]}" > "$TMP/tty"
check "eval tty: one human line, no JSON ($(cat "$TMP/tty"))" grep -qE '^eval: loss [0-9.]+ \(perplexity [0-9.]+\) over 64 tokens$' "$TMP/tty"
"$MT" "${eargs[@]}" > "$TMP/piped" 2>/dev/null
check "eval piped: the JSON object" jqok -e '.tokens == 64 and (.loss | type) == "number"' "$TMP/piped"
finish
