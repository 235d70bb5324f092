#!/usr/bin/env bash
# The speculative step in virtual time and in the plan: the sim runs it
# deterministically, its trace shows the optimizer thread updating layers under
# the backward, it is faster than the plain step where the optimizer paces it;
# the optimizer lane copies nothing (updates out of place, kept by a swap); the
# plan reports its window, spare bytes and rollback cost, turns it off
# where the host has no room, and the CLI refuses it where it does not apply.
source "$(dirname "$0")/lib.sh"

sim14=(--config experiments/models/qwen2.5-14b.json --backend sim --hardware gh200-480g --precision paper
       --batch 8 --seq-len 1024 --steps 4)
"$MT" train "${sim14[@]}" --trace "$TMP/spec.json" > "$TMP/spec.jsonl" 2>/dev/null
check "sim, speculative" test $? -eq 0
"$MT" train "${sim14[@]}" > "$TMP/spec2.jsonl" 2>/dev/null
"$MT" train "${sim14[@]}" --speculative-step false > "$TMP/plain.jsonl" 2>/dev/null
check "sim, plain" test $? -eq 0
check "the sim decides what was speculated on virtual time: two runs agree" \
  test "$(jq -c '[.step_ms, .spec_units]' "$TMP/spec.jsonl")" = "$(jq -c '[.step_ms, .spec_units]' "$TMP/spec2.jsonl")"
check "units speculated every step, none rolled back (no data: the norm is 0)" \
  test "$(jq -s 'all(.spec_units > 0 and .rollbacks == 0 and (.skipped | not))' "$TMP/spec.jsonl")" = true
check "the plain step speculates nothing" test "$(jq -s 'all(.spec_units == 0)' "$TMP/plain.jsonl")" = true
check "speculation shortens the optimizer-paced step (14B, batch 8, gh200-480g)" \
  test "$(jq -s --slurpfile p "$TMP/plain.jsonl" '.[2].step_ms < $p[2].step_ms' "$TMP/spec.jsonl")" = true
under=$(jq '[.traceEvents[] | select(.ph == "X")] as $e | ($e | map(select(.name == "backward"))) as $b
  | [$e[] | select(.name == "adamw (speculative)") | . as $x
     | select(any($b[]; .ts < $x.ts + $x.dur and $x.ts < .ts + .dur))] | length' "$TMP/spec.json")
check "the trace shows speculative updates under the backward ($under spans)" test "$under" -gt 0
lane=$(jq -c '(.traceEvents | map(select(.ph == "M" and .name == "thread_name" and .args.name == "host: optimizer") | .tid)) as $t
  | [.traceEvents[] | select(.ph == "X" and (.tid as $x | $t | index($x))) | .name] | unique' "$TMP/spec.json")
check "the optimizer lane holds AdamW spans (and the embedding rows' gather) only, no copies ($lane)" \
  test "$lane" = '["adamw","adamw (embedding rest)","adamw (embedding rows)","adamw (speculative)","gather (embedding rows)"]'

heads=$(jq '[.traceEvents[] | select(.ph == "X" and .name == "adamw" and .args.layer == -1)] | length' "$TMP/spec.json")
check "the head is never speculated: its plain update runs in each step's final pass ($heads spans, 4 steps)" \
  test "$heads" -ge 4
check "the embedding and every layer may be: up to layers + 1 units a step" \
  test "$(jq -s 'max_by(.spec_units).spec_units <= 49 and max_by(.spec_units).spec_units > 40' "$TMP/spec.jsonl")" = true

# The plan: the window and its bytes; what a rollback adds; no room, no speculation.
plan=(--config experiments/models/qwen2.5-14b.json --batch 8 --seq-len 1024 --precision paper --hardware gh200-480g)
p0=$("$MT" plan "${plan[@]}")
p1=$("$MT" plan "${plan[@]}" --rollback-rate 1)
check "plan: every unit of 14B but the head keeps spare blocks on gh200-480g" test "$(jq '.speculative.window_units == .layers + 1' <<< "$p0")" = true
check "plan: spare bytes are in host_bytes" \
  test "$(jq '.host.spare_bytes == .speculative.spare_bytes and .host.spare_bytes > 0' <<< "$p0")" = true
check "plan: rollback rate 1 adds the rollback cost" \
  test "$(jq -n --argjson a "$p0" --argjson b "$p1" '($b.step_ms - $a.step_ms - $a.speculative.rollback_cost_ms | fabs) < 1e-6 and $a.speculative.rollback_cost_ms > 0')" = true
tight=$("$MT" plan "${plan[@]}" --host-mem-gb 195)
check "plan: no room for spares, no speculation, same step as plain" \
  test "$(jq -n --argjson t "$tight" --argjson f "$("$MT" plan "${plan[@]}" --host-mem-gb 195 --speculative-step false)" \
    '$t.speculative.on == false and $t.step_ms == $f.step_ms and $t.fits')" = true
big=$("$MT" plan --config experiments/models/dense-120b.json --batch 16 --seq-len 1024 --precision paper --hardware h200-1.5t)
check "plan: the 120B-class model still fits 1.5 TB with its window" test "$(jq '.fits and .host.spare_bytes >= 0' <<< "$big")" = true

# Where it does not apply: refused, naming the option (a contradiction: exit 2).
"$MT" train --config $DATA/tiny5_llama.json --schedule zero3 --speculative-step true --steps 1 > /dev/null 2> "$TMP/err"
rc=$?
check "--speculative-step true --schedule zero3 refused (rc $rc)" test $rc -eq 2
check "the refusal names the option" grep -q -- "--speculative-step" "$TMP/err"
"$MT" train --config $DATA/tiny5_llama.json --serial-optimizer --speculative-step true --steps 1 > /dev/null 2>&1
check "--speculative-step true with --serial-optimizer refused" test $? -eq 2
finish
