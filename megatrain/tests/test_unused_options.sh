#!/usr/bin/env bash
# Options that would do nothing are refused, and the plan counts what an option costs:
# `train` refuses --zero3-param-persistence-threshold and --zero3-reduce-bucket-size (the
# engine's zero3 schedule does not model them; exit 2, one line naming the option and
# why), `plan` takes them into DeepSpeed's footprint; `plan --bind copy` plans one more
# layer-sized device buffer (test_plan_copy_bind checks the engine allocates the same).
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { echo "test_unused_options: jq not found, skipped"; exit 77; }
cfg=(--config experiments/models/qwen2.5-7b.json --batch 1 --seq-len 256 --precision paper)

for opt in --zero3-param-persistence-threshold --zero3-reduce-bucket-size; do
  "$MT" train --config $DATA/tiny5_llama.json --schedule zero3 --steps 1 $opt 1000 > "$TMP/out" 2> "$TMP/err"
  rc=$?
  check "train $opt: exit 2 (got $rc)" test $rc -eq 2
  check "train $opt: one stderr line naming it and why" \
    bash -c "[ \$(wc -l < '$TMP/err') -eq 1 ] && grep -q -- '$opt' '$TMP/err' && grep -q 'does not model it' '$TMP/err'"
  check "train $opt: nothing on stdout" test ! -s "$TMP/out"
done
"$MT" plan "${cfg[@]}" --schedule zero3 --zero3-reduce-bucket-size 1e6 --zero3-param-persistence-threshold 0 > "$TMP/z" 2> "$TMP/err"
check "plan takes the zero3 knobs" \
  bash -c "jq -e '.zero3.reduce_bucket_size == 1e6 and .zero3.stage3_param_persistence_threshold == 0' '$TMP/z' > /dev/null"
"$MT" plan "${cfg[@]}" --schedule zero3 > "$TMP/z0" 2> /dev/null
check "plan: the knobs move DeepSpeed's footprint model" \
  test "$(jq .deepspeed_gpu_bytes "$TMP/z")" != "$(jq .deepspeed_gpu_bytes "$TMP/z0")"

"$MT" plan "${cfg[@]}" > "$TMP/p0" && "$MT" plan "${cfg[@]}" --bind copy > "$TMP/p1"
check "plan --bind copy runs" test $? -eq 0
check "plan says the bind mode" bash -c "jq -e '.bind == \"pointer\"' '$TMP/p0' > /dev/null && jq -e '.bind == \"copy\"' '$TMP/p1' > /dev/null"
d=$(( $(jq .gpu.weights_bytes "$TMP/p1") - $(jq .gpu.weights_bytes "$TMP/p0") ))
layer=$(jq '.params_per_layer * 2' "$TMP/p0")   # one layer of bf16 weights (the engine pads to 256 B)
check "plan --bind copy adds one layer's weights to gpu.weights_bytes ($d vs $layer bytes)" \
  bash -c "[ $d -ge $layer ] && [ $d -lt \$(( $layer + 4096 )) ]"
check "... and to gpu_bytes" test $(( $(jq .gpu_bytes "$TMP/p1") - $(jq .gpu_bytes "$TMP/p0") )) -eq $d
finish
