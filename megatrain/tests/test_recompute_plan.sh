#!/usr/bin/env bash
# --recompute and --batch auto in the planner (issue 27): each policy's device
# plan grows as it recomputes less and its predicted step shrinks; auto states
# what it resolved to; --batch auto picks, within host and device memory, the
# candidate with the most tokens/s (the closed form ranks them, the sim checks
# its best 2 of each policy), lists every candidate it compared (the choice among them), and
# train --batch auto runs that choice and says so. Bad values are one line and
# exit 2. (Bitwise equality of the policies: test_schedules_equal; the plan
# equals what the engine allocates: test_footprint; the plan against the sim:
# test_plan_vs_sim.)
source "$(dirname "$0")/lib.sh"
if ! command -v jq > /dev/null; then echo "jq not installed: skipped"; exit 77; fi
M7=experiments/models/qwen2.5-7b.json
# jqe FILTER... FILE: the file is not empty and the filter holds (quietly).
jqe() { [ -s "${*: -1}" ] && jq -e "$@" > /dev/null; }
plan() { "$MT" plan --config $M7 --seq-len 1024 --precision paper --hardware h200-128g "$@"; }

prev_gpu=0
prev_ms=1e300
for r in full mlp norms swiglu none; do
  plan --batch 8 --recompute $r > "$TMP/$r.json"
  check "plan --recompute $r states it" jqe --arg r $r '.recompute == $r and .recompute_asked == $r' "$TMP/$r.json"
  check "--recompute $r: more device memory than the policy before it" \
    jqe --argjson p $prev_gpu '.gpu_bytes > $p and .fits' "$TMP/$r.json"
  check "--recompute $r: no slower than the policy before it" \
    jqe --argjson p $prev_ms '.step_ms <= $p' "$TMP/$r.json"
  prev_gpu=$(jq .gpu_bytes "$TMP/$r.json")
  prev_ms=$(jq .step_ms "$TMP/$r.json")
done
check "none executes 6N-class FLOPs, full more" \
  jq -n -e --slurpfile f "$TMP/full.json" --slurpfile n "$TMP/none.json" \
  '$n[0].prediction.flops_executed < $f[0].prediction.flops_executed and $n[0].hfu < $f[0].hfu' > /dev/null
# auto: the least recompute whose device plan fits the profile's GPU.
plan --batch 8 --recompute auto > "$TMP/auto8.json"
check "auto at batch 8 keeps everything (none fits 141 GB)" jqe '.recompute == "none" and .recompute_asked == "auto" and .fits' "$TMP/auto8.json"
plan --batch 64 --recompute auto > "$TMP/auto64.json"
check "auto at batch 64 steps down to what fits" jqe '.recompute == "mlp" and .fits' "$TMP/auto64.json"
plan --batch 512 --recompute auto > "$TMP/auto512.json"
check "auto at batch 512: full" jqe '.recompute == "full"' "$TMP/auto512.json"
plan --batch 8 --recompute auto --offload-checkpoints true > "$TMP/autooff.json"
check "auto with checkpoints asked into host memory: full" jqe '.recompute == "full" and .gpu.checkpoints == "host"' "$TMP/autooff.json"
check "the default plan names no recompute key (goldens unchanged)" \
  bash -c "\"$MT\" plan --config $M7 --batch 8 --seq-len 1024 --precision paper --hardware h200-128g | jq -e 'has(\"recompute\") | not' > /dev/null"

# --batch auto on the planner.
plan --batch auto > "$TMP/ba.json"
check "plan --batch auto fits" jqe '.fits and .gpu_bytes <= .gpu.have_bytes and .host_bytes <= .host.have_bytes' "$TMP/ba.json"
check "the choice is among the candidates and is the plan printed" \
  jqe '.batch_auto.candidates[.batch_auto.choice] as $c | $c.batch == .batch and $c.recompute == .recompute and
         $c.checkpoint_interval == .checkpoint_interval and $c.weight_buffers == .weight_buffers and
         $c.gpu_bytes == .gpu_bytes and $c.tokens_per_s == .tokens_per_s' "$TMP/ba.json"
check "the sim ran the closed form's best 2 of each policy, and the choice is the sim's best of them" \
  jqe '.batch_auto.sim_checked == 10 and ([.batch_auto.candidates[] | select(.sim_tokens_per_s)] | length) == 10 and
       .batch_auto.candidates[.batch_auto.choice].sim_tokens_per_s ==
         ([.batch_auto.candidates[] | select(.sim_tokens_per_s) | .sim_tokens_per_s] | max) and
       ([.batch_auto.candidates | group_by(.recompute)[] |
         (map(select(.sim_tokens_per_s) | .tokens_per_s) | min) >= (map(select(.sim_tokens_per_s | not) | .tokens_per_s) | max // 0)]
        | all)' "$TMP/ba.json"
"$MT" plan --config $M7 --seq-len 1024 --precision paper --hardware measured --batch auto --host-mem-gb 256 > "$TMP/bam.json"
check "with --hardware measured (no profile file: no sim) the closed form's best is the choice" \
  jqe '.batch_auto.sim_checked == 0 and .tokens_per_s == ([.batch_auto.candidates[].tokens_per_s] | max)' "$TMP/bam.json"
check "every candidate fits the GPU and the host" \
  jqe '.gpu.have_bytes as $g | .host.have_bytes as $h | all(.batch_auto.candidates[]; .gpu_bytes <= $g and .host_bytes <= $h)' "$TMP/ba.json"
check "the candidates cover every policy, K 1/2/4, 2 and 3 buffers, powers of two and the largest batch" \
  jqe '[.batch_auto.candidates[].recompute] | unique == ["full","mlp","none","norms","swiglu"]' "$TMP/ba.json"
check "... K and buffers" jqe '([.batch_auto.candidates[].checkpoint_interval] | unique == [1,2,4]) and
  ([.batch_auto.candidates[].weight_buffers] | unique == [2,3]) and
  (.batch_auto.max_fit_batch as $m | any(.batch_auto.candidates[]; .batch == $m)) and
  any(.batch_auto.candidates[]; .batch == 16)' "$TMP/ba.json"
check "the largest batch that fits is the limit: one more does not fit" \
  bash -c "\"$MT\" plan --config $M7 --seq-len 1024 --precision paper --hardware h200-128g --recompute full \
    --checkpoint-interval 4 --batch \$(jq .batch_auto.max_fit_batch $TMP/ba.json) | jq -e .fits > /dev/null &&
    \"$MT\" plan --config $M7 --seq-len 1024 --precision paper --hardware h200-128g --recompute full \
    --checkpoint-interval 4 --weight-buffers 2 --batch \$((\$(jq .batch_auto.max_fit_batch $TMP/ba.json) + 1)) | jq -e '.fits | not' > /dev/null"
check "plan --batch auto says why" jqe '.batch_auto.why | test("tokens/s in the sim") and test("candidates that fit")' "$TMP/ba.json"
plan --batch auto --recompute full > "$TMP/baf.json"
check "--batch auto keeps a --recompute that is given" jqe '.recompute == "full" and
  ([.batch_auto.candidates[].recompute] | unique == ["full"])' "$TMP/baf.json"
plan --batch auto --schedule resident > "$TMP/bar.json"
check "--batch auto on a schedule that fixes its knobs (resident): batches only, within memory" \
  jqe '.fits and .recompute == "mlp" and ([.batch_auto.candidates[] | [.recompute, .weight_buffers]] | unique | length) == 1' \
  "$TMP/bar.json"
"$MT" plan --config $M7 --seq-len 1024 --precision paper --hardware h200-128g --batch auto --host-mem-gb 110 > "$TMP/bah.json"
check "less host memory: the choice still fits it" jqe '.fits and .host_bytes <= .host.have_bytes' "$TMP/bah.json"

# train --batch auto (sim): the planner's choice, said on stderr, run as chosen.
"$MT" train --config $M7 --backend sim --hardware h200-128g --precision paper --seq-len 1024 --steps 2 --batch auto \
  > "$TMP/t.jsonl" 2> "$TMP/t.err"
check "train --batch auto runs" test -s "$TMP/t.jsonl"
check "train --batch auto says its choice on stderr" grep -q "^megatrain: --batch auto: batch $(jq .batch "$TMP/ba.json"), --recompute $(jq -r .recompute "$TMP/ba.json")" "$TMP/t.err"
check "train --batch auto trains the chosen batch" \
  jqe --argjson b "$(jq .batch "$TMP/ba.json")" '.tokens == $b * 1024' "$TMP/t.jsonl"
"$MT" train --config $M7 --backend sim --hardware h200-128g --precision paper --seq-len 1024 --steps 1 --batch 64 \
  --recompute auto > /dev/null 2> "$TMP/ta.err"
check "train --recompute auto says what it resolved to" grep -q "recompute auto: mlp" "$TMP/ta.err"

# Bad values: one line, exit 2.
bad_arg() { # bad_arg PATTERN ARGS...
  local pat=$1; shift
  "$MT" "$@" > /dev/null 2> "$TMP/err"
  local rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < "$TMP/err")" -eq 1 ] && grep -q -- "$pat" "$TMP/err"
}
check "--recompute bogus" bad_arg "unknown value 'bogus'" train --config $M7 --recompute bogus
check "--recompute none with K 2" bad_arg "contradicts" train --config $M7 --recompute none --checkpoint-interval 2
check "--recompute swiglu with offload" bad_arg "contradicts" plan --config $M7 --recompute swiglu --offload-checkpoints true
check "--recompute on resident" bad_arg "fixes what it keeps" train --config $M7 --schedule resident --recompute none
check "--recompute on zero3" bad_arg "fixes what it keeps" plan --config $M7 --schedule zero3 --recompute auto
check "--batch 0" bad_arg "or auto" train --config $M7 --batch 0
check "--batch 4x" bad_arg "or auto" plan --config $M7 --batch 4x
check "plan --batch auto without --hardware" bad_arg "needs --hardware" plan --config $M7 --batch auto
check "eval --recompute" bad_arg "does not apply" eval --model $FIX/tiny_qwen2 --data $FIX/tokens.bin --batch 2 --recompute none
check "eval --batch auto" bad_arg "eval: --batch auto" eval --model $FIX/tiny_qwen2 --data $FIX/tokens.bin --batch auto
check "--batch auto with --resume" bad_arg "resume" train --resume "$TMP/none" --batch auto
check "train --batch auto on the cpu backend" bad_arg "runs on the CPU here" train --config $M7 --backend cpu --batch auto
check "--batch auto where nothing fits" bad_arg "not even batch 1" plan --config $M7 --precision paper --hardware h200-128g \
  --batch auto --seq-len 1024 --host-mem-gb 50
finish
