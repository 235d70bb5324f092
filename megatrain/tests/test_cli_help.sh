#!/usr/bin/env bash
# Help per command (issue 40): `megatrain train|eval|plan --help` lists that command's
# options, each with its default (read from the defaults the run uses) or "required";
# --opt=value is --opt value; an unknown option names the nearest known one.
source "$(dirname "$0")/lib.sh"
M=$FIX/tiny_llama

# default_of HELPFILE OPTION: the "(default: X)" of OPTION's line.
default_of() { sed -nE "s/^  $2 .*\(default: ([^)]*)\)$/\1/p" "$1"; }

for cmd in train eval plan; do
  "$MT" $cmd --help > "$TMP/out" 2> "$TMP/$cmd.help"
  check "$cmd --help exits 0" test $? -eq 0
  check "$cmd --help: its own usage first" grep -q "^usage: megatrain $cmd " "$TMP/$cmd.help"
  check "$cmd --help: nothing on stdout" test ! -s "$TMP/out"
  check "$cmd --help: every option line has a default or says it is required" \
    test "$(grep -E '^  --' "$TMP/$cmd.help" | grep -cvE '\((default: .+|.*required)\)$')" -eq 0
done
# Each command lists its own options only.
check "train --help lists --save" grep -qE '^  --save DIR ' "$TMP/train.help"
check "train --help does not list plan's --compare" test "$(grep -c '^  --compare' "$TMP/train.help")" -eq 0
check "plan --help lists --compare" grep -qE '^  --compare ' "$TMP/plan.help"
check "plan --help does not list train's --save" test "$(grep -c '^  --save ' "$TMP/plan.help")" -eq 0
check "eval --help does not list --lr" test "$(grep -c '^  --lr ' "$TMP/eval.help")" -eq 0
# Required means required: train runs without --data and --steps (their defaults), not without a model.
check "train --help: --data has a default (synthetic), not 'required'" test "$(default_of "$TMP/train.help" --data)" = synthetic
check "train --help: --steps has a default" test -n "$(default_of "$TMP/train.help" --steps)"
check "train --help: --model is one of three required" grep -qE '^  --model DIR .*one of --model, --config, --resume is required' "$TMP/train.help"
check "eval --help: --data is required" grep -qE '^  --data .*\(required\)$' "$TMP/eval.help"
check "eval --help: --model is required" grep -qE '^  --model .*\(required\)$' "$TMP/eval.help"
check "plan --help: --model or --config required" grep -qE '^  --config .*one of --model, --config is required' "$TMP/plan.help"

# The defaults printed are the ones a run takes: plan with nothing given reports them.
"$MT" plan --model $M > "$TMP/plan.json" 2>/dev/null
for kv in batch:--batch seq_len:--seq-len grad_accum:--grad-accum checkpoint_interval:--checkpoint-interval \
          weight_buffers:--weight-buffers precision:--precision schedule:--schedule; do
  key=${kv%%:*} opt=${kv#*:}
  check "plan --help: $opt's default is what plan uses ($(default_of "$TMP/plan.help" $opt) vs $(jq -r .$key "$TMP/plan.json"))" \
    test "$(default_of "$TMP/plan.help" $opt)" = "$(jq -r ".$key" "$TMP/plan.json")"
done
# train's default steps x batch x seq-len are the tokens and lines a default run makes.
steps=$(default_of "$TMP/train.help" --steps) B=$(default_of "$TMP/train.help" --batch) T=$(default_of "$TMP/train.help" --seq-len)
"$MT" train --model $M --backend cpu > "$TMP/run.jsonl" 2>/dev/null
check "train: --help's default --steps ($steps) is the run's line count" test "$(wc -l < "$TMP/run.jsonl")" -eq "$steps"
check "train: --help's default --batch x --seq-len ($B x $T) is a step's tokens" \
  test "$(jq -s '.[0].tokens' "$TMP/run.jsonl")" -eq $((B * T))

# --opt=value: the same run as --opt value.
"$MT" train --model $M --backend cpu --steps=2 --seq-len=16 --lr=1e-3 > "$TMP/eq" 2>/dev/null
check "--opt=value exits 0" test $? -eq 0
"$MT" train --model $M --backend cpu --steps 2 --seq-len 16 --lr 1e-3 > "$TMP/sp" 2>/dev/null
check "--opt=value: the same losses and tokens as --opt value" \
  test "$(jq -c '[.loss, .tokens, .lr]' "$TMP/eq")" = "$(jq -c '[.loss, .tokens, .lr]' "$TMP/sp")"
check "--opt=value: 2 steps of 4 x 16 tokens" test "$(jq -s -c 'map(.tokens)' "$TMP/eq")" = "[64,64]"
expect 2 "--json: takes no value" train --model $M --json=1
expect 2 "--lr: expected a finite number, got 'abc'" train --model $M --lr=abc
expect 2 "--seq-len is given twice (arguments 3 and 4)" train --model $M --seq-len=16 --seq-len 16
"$MT" plan --model $M --batch=2 --seq-len=32 > "$TMP/p" 2>/dev/null
check "plan --batch=2 --seq-len=32" test "$(jq -c '[.batch, .seq_len]' "$TMP/p")" = "[2,32]"

# An unknown option names the nearest one this command takes.
expect 2 "unknown option '--seqlen'; did you mean --seq-len?" train --model $M --seqlen 16
expect 2 "did you mean --lr-schedule?" train --model $M --lr-shedule cosine
expect 2 "did you mean --compare?" plan --model $M --compar a,b
expect 2 "did you mean --data?" eval --model $M --dta x
"$MT" train --model $M --frobnicate > /dev/null 2> "$TMP/err"
check "a far-off option gets no guess" test "$(grep -c 'did you mean' "$TMP/err")" -eq 0
check "a far-off option points to the command's help" grep -qF '`megatrain train --help` lists them' "$TMP/err"
finish
