#!/usr/bin/env bash
# `megatrain plan` against the paper's shapes (experiments/models) and the
# hardware profiles (experiments/hardware): the honesty checks (what fits where,
# under which schedule), host bytes = params x bytes/param + the stated extras,
# a plan that does not fit is a result (exit 0, fits false, short lists host),
# and bad input is one stderr line with exit 1..125.
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { echo "test_plan_cli: jq not found, skipped"; exit 77; }

M=experiments/models
# plan_ok NAME ARGS...: runs `megatrain plan ARGS`, wants exit 0 and one JSON object; leaves it in $TMP/plan.json
plan_ok() {
  local name=$1; shift
  "$MT" plan "$@" > "$TMP/plan.json" 2> "$TMP/err"
  local rc=$?
  if [ $rc -ne 0 ]; then bad "$name: exit $rc: $(cat "$TMP/err")"; return 1; fi
  if [ "$(wc -l < "$TMP/plan.json")" -ne 1 ] || ! jq -e 'type == "object"' "$TMP/plan.json" > /dev/null; then
    bad "$name: stdout is not one JSON object: $(head -c 300 "$TMP/plan.json")"; return 1
  fi
  ok
}
# want NAME JQ-EXPR: the last plan satisfies the jq expression
want() {
  if jq -e "$2" "$TMP/plan.json" > /dev/null; then ok; else bad "$1: $2 fails on $(head -c 600 "$TMP/plan.json")"; fi
}

std=(--batch 16 --seq-len 1024 --precision paper)

# --- C1: dense 120B in paper precision fits the paper's H200 with 1.5 TB, not the lent 128 GiB machine
plan_ok "120b h200-1.5t" --config $M/dense-120b.json "${std[@]}" --hardware h200-1.5t
want "120b h200-1.5t fits" '.fits == true and .schedule == "megatrain" and .bytes_per_param == 12'
want "120b speed fields" '[.step_ms, .tokens_per_s, .tflops, .mfu, .days_per_billion_tokens] | all(type == "number" and . > 0)'
want "120b profile named" '.hardware.name == "h200-1.5t" and (.hardware.source | endswith("h200-1.5t.json"))'
want "120b prediction model" '.prediction.model == "analytic-v1" and (.bound | IN("compute","h2d","d2h","optimizer"))'
plan_ok "120b h100-128g" --config $M/dense-120b.json "${std[@]}" --hardware h100-128g
want "120b h100-128g does not fit (exit 0)" '.fits == false and any(.short[]; .resource == "host" and .need_bytes > .have_bytes)'

# --- Qwen2.5-7B on the lent H100 machine: megatrain/paper fits, zero3 (18 B/param) does not
plan_ok "7b megatrain" --config $M/qwen2.5-7b.json "${std[@]}" --hardware h100-128g
want "7b megatrain fits" '.fits == true'
plan_ok "7b zero3" --config $M/qwen2.5-7b.json "${std[@]}" --hardware h100-128g --schedule zero3
want "7b zero3 does not fit" '.fits == false and .bytes_per_param == 18 and any(.short[]; .resource == "host")'
want "7b zero3 knobs are DeepSpeed defaults" \
  '.zero3.stage3_prefetch_bucket_size == 5e7 and .zero3.reduce_bucket_size == 5e8 and .zero3.stage3_max_live_parameters == 1e9 and .zero3.stage3_param_persistence_threshold == 1e5'

# --- host bytes = params x bytes/param + the stated extras, for each precision and schedule.
# Engine accounting pads each region to a 4 KiB page: state within 0.1% of params x B/param.
# Extras (staging): megatrain/naive 4 pinned gradient slabs of the largest unit (the 14B's
# embedding, V*C = 152064*5120) in the streamed type + token staging 3*B*T*4; zero3 only the
# token staging; megatrain also the embedding's rows first (its stage of B*T rows of C in the
# weights' type, pinned; a slot per vocabulary row, the row lists and range scratch; the compact
# ids' staging; three vocabulary tables: ROWS below). They add up exactly.
VC=$((152064 * 5120)); TOK=$((3 * 4 * 2048 * 4))
rows_extra() { # rows_extra PRECISION: what rows first adds to megatrain's staging (B*T = 8192 rows)
  local ws=2; [ "$1" = fp32 ] && ws=4
  echo $((8192 * 5120 * ws + 152064 * 4 + 2 * 8192 * 4 + (8192 + 1) * 16 + 152064 + 2 * 152064 * 4 + 8192 * 4))
}
for case in "paper megatrain 12 2" "mixed megatrain 16 2" "fp32 megatrain 16 4" "paper zero3 18 0" "fp32 zero3 16 0" "paper naive 12 2"; do
  set -- $case
  plan_ok "accounting $case" --config $M/qwen2.5-14b.json --batch 4 --seq-len 2048 --precision $1 --schedule $2 --hardware gh200-480g
  want "state = params x $3 ($case)" "(.host.state_bytes - .params * $3 | fabs) <= 0.001 * .params * $3"
  want "host = state + staging ($case)" '.host_bytes == .host.state_bytes + .host.staging_bytes + .host.spare_bytes'
  extra=0; [ "$2" = megatrain ] && extra=$(rows_extra $1)
  want "staging = slabs + tokens (+ rows first) ($case)" \
    "(.host.staging_bytes - (4 * $VC * $4 + $TOK + $extra) | fabs) <= 0.001 * .host.staging_bytes"
  want "gpu = parts ($case)" '.gpu_bytes == .gpu.weights_bytes + .gpu.grads_bytes + .gpu.checkpoint_bytes + .gpu.activation_bytes'
done

# --- C2 shape: 14B on GH200; megatrain is predicted faster than zero3 and naive at the same batch
plan_ok "14b megatrain" --config $M/qwen2.5-14b.json "${std[@]}" --hardware gh200-480g
mt_ms=$(jq .step_ms "$TMP/plan.json")
plan_ok "14b zero3" --config $M/qwen2.5-14b.json "${std[@]}" --hardware gh200-480g --schedule zero3
z3_ms=$(jq .step_ms "$TMP/plan.json")
want "14b zero3 fits gh200" '.fits == true'
check "megatrain ($mt_ms ms) faster than zero3 ($z3_ms ms)" awk -v a="$mt_ms" -v b="$z3_ms" 'BEGIN { exit !(a < b) }'
plan_ok "32b resident" --config $M/qwen2.5-32b.json "${std[@]}" --hardware gh200-480g --schedule resident
want "32b resident (65 GB of bf16 weights alone) does not fit the GPU" '.fits == false and any(.short[]; .resource == "gpu")'

# --- a huge context never errors: it is a result
plan_ok "7b 512k x 64 context" --config $M/qwen2.5-7b.json --batch 64 --seq-len 524288 --precision paper --hardware gh200-480g
want "512k x 64 is a result" '.fits == false and any(.short[]; .resource == "gpu")'
plan_ok "7b max context" --config $M/qwen2.5-7b.json --batch 1 --seq-len 1024 --precision paper --hardware gh200-480g --max-context
want "max_seq_len found" '.max_seq_len >= 65536 and .max_seq_len % 1024 == 0'

# --- profile sources: a path, measured, none
plan_ok "profile by path" --config $M/llama3-8b.json "${std[@]}" --hardware experiments/hardware/rtx4090-256g.json
want "rtx4090 by path" '.hardware.name == "rtx4090-256g" and .step_ms > 0'
plan_ok "measured" --config $M/qwen2.5-7b.json "${std[@]}" --hardware measured
want "measured is labelled" '.hardware.name == "measured" and (.hardware.note | test("assumed")) and .host.mem_bytes > 0'
plan_ok "no hardware" --config $M/qwen2.5-7b.json "${std[@]}"
want "no hardware: memory only" '(has("step_ms") | not) and (.fits | type == "boolean")'
plan_ok "host override" --config $M/qwen2.5-72b.json "${std[@]}" --hardware h200-128g --host-mem-gb 2000
want "72b fits with 2 TB host" '.host.mem_bytes == 2e12 and (.short // [] | all(.resource != "host"))'

# --- bad input: one stderr line, exit 1..125, nothing on stdout
expect_error() {
  local name=$1 needle=$2; shift 2
  "$MT" "$@" > "$TMP/out" 2> "$TMP/err"
  local rc=$?
  if [ $rc -lt 1 ] || [ $rc -gt 125 ]; then bad "$name: exit status $rc (want 1..125)"; return; fi
  if [ "$(wc -l < "$TMP/err")" -ne 1 ]; then bad "$name: want one stderr line: $(cat "$TMP/err")"; return; fi
  if ! grep -qF -- "$needle" "$TMP/err"; then bad "$name: stderr lacks '$needle': $(cat "$TMP/err")"; return; fi
  if [ -s "$TMP/out" ]; then bad "$name: wrote to stdout"; return; fi
  ok
}
expect_error "unknown profile lists the available ones" "h100-128g" plan --config $M/qwen2.5-7b.json --hardware nosuch
expect_error "missing config" "$TMP/none.json" plan --config "$TMP/none.json" --hardware h100-128g
expect_error "no model" "--config" plan --batch 4 --hardware h100-128g
echo '{"schema": "megatrain.hardware/1", "name": ' > "$TMP/broken.json"
expect_error "malformed profile" "$TMP/broken.json" plan --config $M/qwen2.5-7b.json --hardware "$TMP/broken.json"
jq 'del(.host.mem_bytes)' experiments/hardware/h100-128g.json > "$TMP/nomem.json"
expect_error "profile missing a key" "host.mem_bytes" plan --config $M/qwen2.5-7b.json --hardware "$TMP/nomem.json"
expect_error "bad schedule" "--schedule" plan --config $M/qwen2.5-7b.json --schedule fast
expect_error "bad precision" "--precision" plan --config $M/qwen2.5-7b.json --precision half
expect_error "bad checkpoint interval" "--checkpoint-interval" plan --config $M/qwen2.5-7b.json --checkpoint-interval 99

finish
