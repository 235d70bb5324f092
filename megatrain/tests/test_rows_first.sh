#!/usr/bin/env bash
# --embedding-rows-first (engine/embed_rows.h): the optimizer pass updates first the
# embedding rows the next step reads, the next forward copies in only those, and the
# other rows are updated under it. Checked on the cpu backend:
# - bitwise the same parameters and Adam moments as the whole-table update, in every
#   precision, G = 1 and 2, with the speculative step on every unit (--grad-clip 0), and
#   with --gpus 2 (one rows list for the host's ranks);
# - the trace shows the path taken: the rows' AdamW, gather and copy where it applies; the
#   whole table where the step's rows exceed half the vocabulary, and without the flag;
# - in the sim (Qwen2.5-7B width, 8 layers, batch 8, h200-128g) the step is shorter, and
#   the embedding that crosses before the forward is the batch's rows only;
# - --embedding-rows-first true where it cannot apply: one line, exit 2.
source "$(dirname "$0")/lib.sh"

run() { # run OUTDIR ARGS...
  local out=$1; shift
  "$MT" train "$@" --data $FIX/tokens.bin --seq-len 32 --steps 4 --lr 1e-3 --backend cpu --save "$out" \
    --trace "$out.trace.json" > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}
names() { jq -c '[.traceEvents[] | select(.ph == "X") | .name] | unique' "$1"; }
has_span() { names "$1" | jq -e --arg n "$2" 'index($n) != null' > /dev/null; }

tiny5="--config $DATA/tiny5_llama.json --seed 7"
for prec in fp32 paper mixed; do
  for G in 1 2; do
    t=${prec}_g$G
    check "rows first ($prec, G=$G)" run "$TMP/on_$t" $tiny5 --precision $prec --batch 2 --grad-accum $G
    check "whole table ($prec, G=$G)" run "$TMP/off_$t" $tiny5 --precision $prec --batch 2 --grad-accum $G \
      --embedding-rows-first false
    check "rows first == whole table ($prec, G=$G): parameters and moments bitwise" same_state "$TMP/on_$t" "$TMP/off_$t"
    check "rows first ($prec, G=$G): the trace has the rows' update, gather and copy" \
      eval 'has_span "$TMP/on_$t.trace.json" "adamw (embedding rows)" && has_span "$TMP/on_$t.trace.json" "adamw (embedding rest)" &&
            has_span "$TMP/on_$t.trace.json" "gather (embedding rows)" && has_span "$TMP/on_$t.trace.json" "embedding rows in"'
    check "whole table ($prec, G=$G): no rows in the trace" eval '! has_span "$TMP/off_$t.trace.json" "embedding rows in"'
  done
done
# The speculative step on every unit (no clipping): kept updates and rows first together.
check "speculating, rows first" run "$TMP/spec_on" $tiny5 --precision paper --batch 2 --grad-clip 0 --speculative-step true
check "speculating, whole table" run "$TMP/spec_off" $tiny5 --precision paper --batch 2 --grad-clip 0 \
  --speculative-step true --embedding-rows-first false
check "speculating: units were speculated" test "$(jq -s 'map(.spec_units) | add > 0' "$TMP/spec_on.jsonl")" = true
check "speculating: rows first == whole table bitwise" same_state "$TMP/spec_on" "$TMP/spec_off"
# Two ranks on one host share one rows list.
check "--gpus 2, rows first" run "$TMP/g2_on" $tiny5 --precision paper --batch 6 --gpus 2
check "--gpus 2, whole table" run "$TMP/g2_off" $tiny5 --precision paper --batch 6 --gpus 2 --embedding-rows-first false
check "--gpus 2: rows first == whole table bitwise" same_state "$TMP/g2_on" "$TMP/g2_off"
check "--gpus 2: the rows path was taken" has_span "$TMP/g2_on.trace.json" "embedding rows in"
# More rows than half the vocabulary (256): random ids, 16 x 32 tokens a step: the whole table.
check "many rows" "$MT" train $tiny5 --precision fp32 --batch 16 --seq-len 32 --steps 3 --data synthetic --backend cpu \
  --trace "$TMP/many.json" > /dev/null 2>&1
check "many rows: the whole table crosses, no rows staged" \
  eval '! has_span "$TMP/many.json" "embedding rows in" && ! has_span "$TMP/many.json" "adamw (embedding rows)"'

# The sim: shorter steps, and only the batch's rows cross before the forward.
sim=(--config "$TMP/q7_l8.json" --backend sim --hardware h200-128g --precision paper --batch 8 --seq-len 1024
     --steps 6 --data synthetic)
jq '.num_hidden_layers = 8' experiments/models/qwen2.5-7b.json > "$TMP/q7_l8.json"
"$MT" train "${sim[@]}" --trace "$TMP/sim_on.json" > "$TMP/sim_on.jsonl" 2> /dev/null
check "sim, rows first" test $? -eq 0
"$MT" train "${sim[@]}" --embedding-rows-first false > "$TMP/sim_off.jsonl" 2> /dev/null
check "sim, whole table" test $? -eq 0
check "sim: rows first shortens the AdamW-paced step (7B width, batch 8)" \
  test "$(jq -s --slurpfile off "$TMP/sim_off.jsonl" '.[4].step_ms < 0.95 * $off[4].step_ms' "$TMP/sim_on.jsonl")" = true
# (the rows cross while the rest of the table's AdamW runs: at the copy's share of the host memory,
# sim.h "host memory", where step 1's whole table crossed alone)
share=$(jq '.host.shared_gbps / (.link.h2d_gbps.pinned + .host.adamw_params_per_s.paper * .host.adamw_bytes_per_param.paper / 1e9)' \
  experiments/hardware/h200-128g.json)
check "sim: the rows' copy is at most the step's tokens' rows (8192 of 152064), the table's is whole" \
  test "$(jq --argjson share "$share" '[.traceEvents[] | select(.ph == "X")] | ([.[] | select(.name == "embedding in" and .args.step == 1) | .dur]
    | add) as $whole | [.[] | select(.name == "embedding rows in") | .dur] | length > 0 and all(. < $whole * 8192 / 152064 / $share * 1.01)' \
    "$TMP/sim_on.json")" = true

# The plan says whether it is on, the rows a step may stage and their host bytes.
pl=(--seq-len 1024 --precision paper --hardware h200-128g --batch 16)
check "plan: on for Qwen2.5-7B, 16384 rows (the step's tokens), in the host bytes" \
  test "$("$MT" plan --config experiments/models/qwen2.5-7b.json "${pl[@]}" |
    jq '.embedding_rows_first | .on and .stage_rows == 16384 and .host_bytes > 16384 * 3584 * 2')" = true
check "plan: off for a tied embedding (Qwen2.5-3B)" \
  test "$("$MT" plan --config experiments/models/qwen2.5-3b.json "${pl[@]}" | jq '.embedding_rows_first.on')" = false
check "plan: off with --embedding-rows-first false" \
  test "$("$MT" plan --config experiments/models/qwen2.5-7b.json "${pl[@]}" --embedding-rows-first false |
    jq '.embedding_rows_first | (.on | not) and .host_bytes == 0')" = true

# Updates in parts: the head crosses part by part as its update goes, so a copy of it starts (1 ms or more)
# while its AdamW (in the final pass, after the layers) still runs. (A worker's span is tagged
# with the step the host thread is in when it is recorded: not a field to select on.)
check "sim: the head's copy starts under its own update (parts)" \
  test "$(jq '[.traceEvents[] | select(.ph == "X")] | [.[] | select(.name == "head in")] as $h
    | [.[] | select(.name == "adamw" and .args.layer == -1)] | any(.[]; . as $a | any($h[]; .ts > $a.ts and .ts < $a.ts + $a.dur - 1000))' \
    "$TMP/sim_on.json")" = true

# --update-parts: whole units (1) and another split (3) give the default's parameters bitwise.
for parts in 1 3; do
  check "--update-parts $parts" run "$TMP/parts$parts" $tiny5 --precision mixed --batch 2 --grad-accum 2 --update-parts $parts
  check "--update-parts $parts == the default (8): bitwise" same_state "$TMP/parts$parts" "$TMP/on_mixed_g2"
done
"$MT" train "${sim[@]}" --update-parts 1 > "$TMP/sim_whole.jsonl" 2> /dev/null
check "sim: updates in parts shorten the step against whole units (7B width, batch 8)" \
  test "$(jq -s --slurpfile w "$TMP/sim_whole.jsonl" '.[4].step_ms < $w[4].step_ms' "$TMP/sim_on.jsonl")" = true
for bad in "--update-parts 17" "--update-parts 0" "--schedule zero3 --update-parts 2"; do
  # shellcheck disable=SC2086
  "$MT" train $tiny5 --backend cpu --steps 1 $bad > /dev/null 2> "$TMP/bad.err"
  rc=$?
  check "$bad: exit 2, one line" eval 'test $rc -eq 2 && test "$(wc -l < "$TMP/bad.err")" -eq 1'
done

# Where it cannot apply.
for bad in "--schedule zero3" "--serial-optimizer"; do
  # shellcheck disable=SC2086
  "$MT" train $tiny5 --backend cpu --steps 1 $bad --embedding-rows-first true > /dev/null 2> "$TMP/bad.err"
  check "--embedding-rows-first true $bad: exit 2" test $? -eq 2
  check "--embedding-rows-first true $bad: one line naming the flag" \
    eval 'test "$(wc -l < "$TMP/bad.err")" -eq 1 && grep -q -- "--embedding-rows-first" "$TMP/bad.err"'
done
finish
