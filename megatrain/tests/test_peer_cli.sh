#!/usr/bin/env bash
# --peer deepspeed-zero3 | fsdp2-offload | official (engine/peer.h, baselines/PEERS.md):
# each peer's closed form in the planner and its sim run agree within 10% (the same
# bound as our schedules, test_plan_vs_sim.sh) where compute, link and optimizer
# each bound the step; `plan --peer deepspeed-zero3` charges DeepSpeed's 16-18 host
# bytes per parameter; a peer runs the precision it uses and refuses the others in
# one line; a slower measured optimizer (results/cpu_optimizers.jsonl) and DeepSpeed's
# overlap_comm off each make both predictions slower; train lines are our schedules'.
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { echo "test_peer_cli: jq not found, skipped"; exit 77; }
jqt() { jq -e "$@" > /dev/null; } # a jq test, quietly
export MT_CPU_OPTIMIZERS="$TMP/none.jsonl" # the code-reading defaults, whatever results/ holds
: > "$MT_CPU_OPTIMIZERS"

plan_ms() { # plan_ms MODEL PROFILE BATCH PEER [args]
  local m=$1 hw=$2 b=$3 p=$4; shift 4
  "$MT" plan --config experiments/models/$m.json --batch $b --seq-len 1024 --hardware $hw --peer $p "$@" | jq .step_ms
}
sim_ms() {
  local m=$1 hw=$2 b=$3 p=$4; shift 4
  "$MT" train --config experiments/models/$m.json --backend sim --hardware $hw --batch $b --seq-len 1024 --steps 3 \
    --peer $p "$@" 2>/dev/null | jq -s '.[1].step_ms'
}
agree() { # agree MODEL PROFILE BATCH PEER
  local plan sim
  plan=$(plan_ms "$@") sim=$(sim_ms "$@")
  echo "$4: $1 on $2, batch $3: plan $plan ms, sim $sim ms" >&2
  jq -n --argjson p "$plan" --argjson s "$sim" '(($p - $s) / $s | fabs) < 0.10' | grep -q true
}
for peer in deepspeed-zero3 fsdp2-offload official; do
  check "$peer: plan and sim agree, 7B h100-128g b8 (optimizer-bound)" agree qwen2.5-7b h100-128g 8 $peer
  check "$peer: plan and sim agree, 7B h100-128g b64" agree qwen2.5-7b h100-128g 64 $peer
done
check "deepspeed-zero3: plan and sim agree, 14B gh200-480g b16" agree qwen2.5-14b gh200-480g 16 deepspeed-zero3
check "official: plan and sim agree, 7B h100-128g b158 (compute-bound)" agree qwen2.5-7b h100-128g 158 official

# DeepSpeed's host bytes per parameter, and each peer's precision.
"$MT" plan --config experiments/models/qwen2.5-14b.json --batch 4 --seq-len 1024 --peer deepspeed-zero3 > "$TMP/ds"
check "plan --peer deepspeed-zero3: 16-18 host bytes/param" \
  jqt '.bytes_per_param >= 16 and .bytes_per_param <= 18 and .precision == "mixed" and .schedule == "deepspeed-zero3"' "$TMP/ds"
check "plan --peer deepspeed-zero3: the peer's costs are in the JSON" \
  jqt '.peer.optimizer_impl == "deepspeed_cpu_adam" and .peer.fetch == "submodule" and .peer.grad_wire == "f32"' "$TMP/ds"
"$MT" plan --config experiments/models/qwen2.5-7b.json --batch 4 --seq-len 1024 --peer official > "$TMP/of"
check "plan --peer official: paper precision, copy bind, K 4, 3 passes" \
  jqt '.precision == "paper" and .bind == "copy" and .peer.checkpoint_interval == 4 and .peer.weight_passes == 3' "$TMP/of"
for bad in "deepspeed-zero3 paper" "fsdp2-offload paper" "official mixed" "official fp32"; do
  set -- $bad
  "$MT" plan --config experiments/models/qwen2.5-7b.json --batch 4 --seq-len 1024 --peer $1 --precision $2 \
    > "$TMP/out" 2> "$TMP/err"
  rc=$?
  check "--peer $1 --precision $2: exit 2, one line naming --precision and the peer" \
    bash -c "[ $rc -eq 2 ] && [ \$(wc -l < '$TMP/err') -eq 1 ] && grep -q -- '--precision $2' '$TMP/err' && grep -q -- '$1' '$TMP/err' && [ ! -s '$TMP/out' ]"
done
"$MT" plan --config experiments/models/qwen2.5-7b.json --batch 4 --seq-len 1024 --peer deepspeed-zero3 \
  --precision fp32 > "$TMP/fp32"
check "deepspeed-zero3 fp32: 16 B/param" jqt '.bytes_per_param == 16' "$TMP/fp32"
"$MT" train --config $DATA/tiny5_llama.json --steps 1 --peer official > /dev/null 2> "$TMP/err"
check "train --peer on a backend that computes: refused (exit 2)" \
  bash -c "[ $? -eq 2 ] && grep -q 'simulator or the planner' '$TMP/err'"
"$MT" plan --config experiments/models/qwen2.5-7b.json --batch 4 --seq-len 1024 --peer official --schedule zero3 \
  > /dev/null 2> "$TMP/err"
check "--peer with --schedule: refused (exit 2)" bash -c "[ $? -eq 2 ] && grep -q -- '--peer official' '$TMP/err'"
"$MT" plan --config experiments/models/qwen2.5-7b.json --batch 4 --seq-len 1024 --peer nobody > /dev/null 2> "$TMP/err"
check "--peer nobody: the known names" bash -c "[ $? -eq 2 ] && grep -q 'deepspeed-zero3, fsdp2-offload, official' '$TMP/err'"

# The same JSON lines as our schedules.
"$MT" train --config experiments/models/qwen2.5-7b.json --backend sim --hardware h100-128g --batch 1 --seq-len 256 \
  --steps 2 --peer fsdp2-offload 2>/dev/null | head -1 > "$TMP/p"
"$MT" train --config experiments/models/qwen2.5-7b.json --backend sim --hardware h100-128g --batch 1 --seq-len 256 \
  --steps 2 --precision mixed 2>/dev/null | head -1 > "$TMP/s"
check "train --peer: the same keys as a schedule's train line" test "$(jq -c keys "$TMP/p")" = "$(jq -c keys "$TMP/s")"

# One peer parameter at a time moves both predictions the way it should.
base_p=$(plan_ms qwen2.5-7b h100-128g 8 deepspeed-zero3) base_s=$(sim_ms qwen2.5-7b h100-128g 8 deepspeed-zero3)
printf '%s\n' '{"impl": "deepspeed_cpu_adam", "params_per_s": 1e8, "triad_gb_s": 20, "env": {}}' \
  '{"impl": "megatrain_adamw", "params_per_s": 1e9, "triad_gb_s": 20, "env": {}}' > "$MT_CPU_OPTIMIZERS"
slow_p=$(plan_ms qwen2.5-7b h100-128g 8 deepspeed-zero3) slow_s=$(sim_ms qwen2.5-7b h100-128g 8 deepspeed-zero3)
check "a slower measured DeepSpeedCPUAdam: plan slower ($base_p -> $slow_p)" jqt -n "$slow_p > $base_p"
check "a slower measured DeepSpeedCPUAdam: sim slower ($base_s -> $slow_s)" jqt -n "$slow_s > $base_s"
"$MT" plan --config experiments/models/qwen2.5-7b.json --batch 8 --seq-len 1024 --hardware h100-128g \
  --peer deepspeed-zero3 | jq -r .peer.optimizer_rate_source > "$TMP/src"
check "the plan names the measurement it used" grep -q "measured: $MT_CPU_OPTIMIZERS" "$TMP/src"
: > "$MT_CPU_OPTIMIZERS"
# (at batch 64, where the compute stream the gradients then share is busy)
on_p=$(plan_ms qwen2.5-7b h100-128g 64 deepspeed-zero3) on_s=$(sim_ms qwen2.5-7b h100-128g 64 deepspeed-zero3)
off_p=$(plan_ms qwen2.5-7b h100-128g 64 deepspeed-zero3 --zero3-overlap-comm false)
off_s=$(sim_ms qwen2.5-7b h100-128g 64 deepspeed-zero3 --zero3-overlap-comm false)
check "overlap_comm off: plan slower ($on_p -> $off_p)" jqt -n "$off_p > $on_p"
check "overlap_comm off: sim slower ($on_s -> $off_s)" jqt -n "$off_s > $on_s"

# Each peer's attention is its own implementation, priced at the profile's table for it: a slow
# measured torch_sdpa moves DeepSpeed and FSDP2 (HF models with SDPA), not the official code
# (FlashAttention-2, torch_sdpa_flash), and the plan names the kernel and the source.
jq '.gpu.attention_tflops = {"torch_sdpa": [[1024, 5]]} | .sources["gpu.attention_tflops.torch_sdpa"] = "test table"' \
  experiments/hardware/h100-128g.json > "$TMP/sdpa.json"
for p in deepspeed-zero3 fsdp2-offload; do
  b_p=$(plan_ms qwen2.5-7b h100-128g 8 $p) t_p=$(plan_ms qwen2.5-7b "$TMP/sdpa.json" 8 $p)
  b_s=$(sim_ms qwen2.5-7b h100-128g 8 $p) t_s=$(sim_ms qwen2.5-7b "$TMP/sdpa.json" 8 $p)
  check "$p: a slow measured torch_sdpa makes plan ($b_p -> $t_p) and sim ($b_s -> $t_s) slower" \
    jqt -n "$t_p > $b_p and $t_s > $b_s"
done
check "official: a torch_sdpa table leaves it alone (it runs FlashAttention-2)" \
  jqt -n "$(plan_ms qwen2.5-7b h100-128g 8 official) == $(plan_ms qwen2.5-7b "$TMP/sdpa.json" 8 official)"
"$MT" plan --config experiments/models/qwen2.5-7b.json --batch 8 --seq-len 1024 --hardware "$TMP/sdpa.json" \
  --peer fsdp2-offload | jq -c .attention > "$TMP/attn"
check "the plan names the peer's kernel, its rate and the table's source" \
  jqt -e '.kernel == "torch_sdpa" and .tflops == 5 and .source == "test table"' "$TMP/attn"
"$MT" plan --config experiments/models/qwen2.5-7b.json --batch 8 --seq-len 1024 --peer official --attention cudnn \
  > /dev/null 2> "$TMP/err"
check "--peer with --attention: refused (exit 2), naming the peer's own" \
  bash -c "[ $? -eq 2 ] && grep -q 'runs its own attention (torch_sdpa_flash)' '$TMP/err'"
finish
