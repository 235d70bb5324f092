#!/usr/bin/env bash
# Two independent predictions of the same step must agree: the planner's
# closed-form model (predict.c, "analytic-v1") and the sim backend running the
# real scheduler in virtual time. Within 10% on configurations that are compute-,
# transfer- and optimizer-bound; a change that breaks either shows up here.
source "$(dirname "$0")/lib.sh"

agree() { # agree MODEL PROFILE BATCH
  local plan sim
  plan=$("$MT" plan --config experiments/models/$1.json --batch $3 --seq-len 1024 --precision paper --hardware $2 | jq .step_ms)
  sim=$("$MT" train --config experiments/models/$1.json --backend sim --hardware $2 --precision paper --batch $3 \
    --seq-len 1024 --steps 4 2>/dev/null | jq -s '.[2].step_ms')
  echo "$1 on $2, batch $3: plan $plan ms, sim $sim ms" >&2
  jq -n --argjson p "$plan" --argjson s "$sim" '(($p - $s) / $s | fabs) < 0.10' | grep -q true
}
check "7B on h100-128g, batch 64 (compute-bound)" agree qwen2.5-7b h100-128g 64
check "7B on h100-128g, batch 8 (optimizer-bound)" agree qwen2.5-7b h100-128g 8
check "14B on gh200-480g, batch 16" agree qwen2.5-14b gh200-480g 16
check "dense 120B-class on h200-1.5t, batch 16" agree dense-120b h200-1.5t 16
finish
