#!/usr/bin/env bash
# Throughput regressions without timing CI: the sim backend's step time is a
# pure function of the schedule and the profile, so the schedule's overlap can
# be asserted exactly. Qwen2.5-7B, batch 64 x 1024, paper precision, on the
# h100-128g profile: megatrain must beat zero3, which must beat naive, and keep
# the GPU busy; the numbers must not change between runs.
source "$(dirname "$0")/lib.sh"

step_ms() { # step_ms SCHEDULE [ARGS]: median virtual step time of steps 2-4 (step 1 has no optimizer wait)
  local s=$1; shift
  "$MT" train --config experiments/models/qwen2.5-7b.json --backend sim --hardware h100-128g --precision paper \
    --batch 64 --seq-len 1024 --steps 5 --schedule "$s" "$@" 2>/dev/null | jq -s '[.[1:4][].step_ms] | sort | .[1]'
}
busy() {
  "$MT" train --config experiments/models/qwen2.5-7b.json --backend sim --hardware h100-128g --precision paper \
    --batch 64 --seq-len 1024 --steps 5 2>/dev/null | jq -s '[.[1:4][].gpu_busy_frac] | sort | .[1]'
}
mt=$(step_ms megatrain) z3=$(step_ms zero3) nv=$(step_ms naive) wb1=$(step_ms megatrain --weight-buffers 1)
echo "simulated step ms: megatrain $mt, 1 buffer $wb1, zero3 $z3, naive $nv" >&2
lt() { jq -n --argjson a "$1" --argjson b "$2" '$a < $b' | grep -q true; }
check "megatrain ($mt) faster than zero3 ($z3)" lt "$mt" "$z3"
check "zero3 ($z3) faster than naive ($nv)" lt "$z3" "$nv"
check "prefetch pays: 2 buffers ($mt) faster than 1 ($wb1)" lt "$mt" "$wb1"
b=$(busy)
check "megatrain keeps the GPU busy >= 0.8 at batch 64 ($b)" lt 0.8 "$b"
check "simulation is deterministic" test "$(step_ms megatrain)" = "$mt"
finish
