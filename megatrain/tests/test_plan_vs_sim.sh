#!/usr/bin/env bash
# Two independent predictions of the same step must agree: the planner's
# closed-form model (predict.c, "analytic-v1") and the sim backend running the
# real scheduler in virtual time. Within 10% on configurations that are compute-,
# transfer- and optimizer-bound; a change that breaks either shows up here.
source "$(dirname "$0")/lib.sh"

agree() { # agree MODEL PROFILE BATCH [SEQ [ARGS...]]
  local m=$1 hw=$2 b=$3 t=${4:-1024} plan sim
  shift $(($# < 4 ? $# : 4))
  plan=$("$MT" plan --config experiments/models/$m.json --batch $b --seq-len $t --precision paper --hardware $hw "$@" |
    jq .step_ms)
  sim=$("$MT" train --config experiments/models/$m.json --backend sim --hardware $hw --precision paper --batch $b \
    --seq-len $t --steps 4 "$@" 2>/dev/null | jq -s '.[2].step_ms')
  echo "$m on $hw, batch $b x $t $*: plan $plan ms, sim $sim ms" >&2
  jq -n --argjson p "$plan" --argjson s "$sim" '(($p - $s) / $s | fabs) < 0.10' | grep -q true
}
check "7B on h100-128g, batch 64 (compute-bound)" agree qwen2.5-7b h100-128g 64
check "7B on h100-128g, batch 8 (optimizer-bound)" agree qwen2.5-7b h100-128g 8
check "14B on gh200-480g, batch 16" agree qwen2.5-14b gh200-480g 16
check "dense 120B-class on h200-1.5t, batch 16" agree dense-120b h200-1.5t 16
# --recompute: the kept internals change what the backward computes (and what fits); both price it.
check "7B on h200-128g, batch 16, --recompute none" agree qwen2.5-7b h200-128g 16 1024 --recompute none --speculative-step false
check "7B on h100-128g, batch 16, --recompute swiglu" agree qwen2.5-7b h100-128g 16 1024 --recompute swiglu
check "7B on h100-128g, batch 32, --recompute mlp" agree qwen2.5-7b h100-128g 32 1024 --recompute mlp --speculative-step false
check "7B on h100-128g, batch 16, --recompute norms" agree qwen2.5-7b h100-128g 16 1024 --recompute norms
check "7B on h100-128g, batch 16, --recompute auto" agree qwen2.5-7b h100-128g 16 1024 --recompute auto

# Long context, where attention sets the step: both price each implementation at the
# profile's measured table (a test table: cudnn twice native's rate at 16k, both from 1k to 64k).
jq '.gpu.attention_tflops = {"native": [[1024, 150], [65536, 250]], "cudnn": [[1024, 300], [65536, 500]]}
    | .sources["gpu.attention_tflops.native"] = "test table" | .sources["gpu.attention_tflops.cudnn"] = "test table"' \
  experiments/hardware/h100-128g.json > "$TMP/attn.json"
check "7B at 32k tokens, --attention native, measured table" agree qwen2.5-7b "$TMP/attn.json" 1 32768 --attention native
check "7B at 32k tokens, --attention cudnn, measured table" agree qwen2.5-7b "$TMP/attn.json" 1 32768 --attention cudnn
step_of() { "$MT" plan --config experiments/models/qwen2.5-7b.json --batch 1 --seq-len 32768 --precision paper \
  --hardware "$TMP/attn.json" --attention "$1" | jq .step_ms; }
faster() { jq -n --argjson a "$(step_of cudnn)" --argjson b "$(step_of native)" '$a < 0.8 * $b' | grep -q true; }
check "at 32k the faster attention table gives a much shorter step" faster
finish
