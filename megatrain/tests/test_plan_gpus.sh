#!/usr/bin/env bash
# `megatrain plan --gpus N --hosts H` and `--tokens-per-day X` (planner/ranks.c, planner/plan_tokens_per_day.c):
# --gpus 1 is the one-GPU plan, field for field; N GPUs are never faster than N one-GPU ranks;
# more hosts never need more memory on a host but host 0's gather buffer; the bytes and times of
# the PCIe-shared and NVLink cases are the formulas' (two fixture profiles with round numbers);
# --tokens-per-day picks the fewest sufficient GPUs, then hosts; bad input is one line, exit 2.
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { echo "test_plan_gpus: jq not found, skipped"; exit 77; }

M=experiments/models/qwen2.5-7b.json
NV=$DATA/hw_multi_nvlink.json
PC=$DATA/hw_multi_pcie.json
std=(--config $M --seq-len 1024 --precision paper)

plan() { "$MT" plan "$@" 2> "$TMP/err"; }
num() { jq -r "$1" "$TMP/$2.json"; }
# le A B [EPS]: A <= B (1 + EPS)
le() { awk -v a="$1" -v b="$2" -v e="${3:-1e-9}" 'BEGIN { exit !(a <= b * (1 + e)) }'; }
# close A B: equal within 1e-9 relative
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= 1e-9 * m + 1e-9) }'; }

# --- --gpus 1 (and --hosts 1) is the plan without them, every field
for hw in hgx-h100-8x h100-128g $NV; do
  plan "${std[@]}" --batch 16 --hardware $hw | jq -S . > "$TMP/one.json"
  plan "${std[@]}" --batch 16 --hardware $hw --gpus 1 --hosts 1 | jq -S . > "$TMP/g1.json"
  if cmp -s "$TMP/one.json" "$TMP/g1.json" && [ -s "$TMP/one.json" ]; then ok
  else bad "--gpus 1 --hosts 1 differs from the plan without them on $hw: $(diff "$TMP/one.json" "$TMP/g1.json" | head -5)"; fi
done

# --- N GPUs are never faster than N x one GPU at the same rows per GPU (ours and the official code's)
for hw in hgx-h100-8x $NV $PC; do
  for who in "--precision paper" "--peer official"; do
   for rows in 4 8 158; do
    plan --config $M --seq-len 1024 $who --batch $rows --hardware $hw > "$TMP/r1.json"
    one=$(num .tokens_per_s r1)
    for n in 2 4 8; do
      plan --config $M --seq-len 1024 $who --batch $((rows * n)) --hardware $hw --gpus $n > "$TMP/rn.json"
      got=$(num .tokens_per_s rn)
      # The one exception, and its cause: after the reduce-scatter each of N GPUs copies out 1/N of the
      # gradient (NVLink carries the rest), so a rank may step faster than one GPU, by at most the copy-out
      # time it saves: rank step >= one GPU's step - (its d2h time - the rank's).
      saved=$(awk -v a="$(num .prediction.d2h_ms r1)" -v b="$(num .prediction.d2h_ms rn)" 'BEGIN { printf "%.17g", a - b }')
      if le "$got" "$(awk -v n=$n -v o="$one" 'BEGIN { printf "%.17g", n * o }')"; then ok
      elif [ "$(num .ranks.gradients rn | cut -c1-4)" = NCCL ] &&
           le "$(num .step_ms r1)" "$(awk -v r="$(num .ranks.rank_step_ms rn)" -v s="$saved" 'BEGIN { printf "%.17g", r + s }')"; then ok
      else bad "$hw $who --gpus $n: $got tokens/s > $n x $one, more than the copy-out it saves"; fi
      check "$hw $who --gpus $n: the ranks object says its one-GPU rate" close "$(num .ranks.one_gpu_tokens_per_s rn)" "$one"
    done
   done
  done
done
# ... and that exception is seen where it should be: 4 rows per GPU on hgx-h100-8x, one GPU d2h-bound
plan "${std[@]}" --batch 4 --hardware hgx-h100-8x > "$TMP/r1.json"
plan "${std[@]}" --batch 8 --hardware hgx-h100-8x --gpus 2 > "$TMP/rn.json"
check "4 rows/GPU: one GPU is d2h-bound, two beat 2x it (each copies half the gradient)" \
  [ "$(jq -r .bound "$TMP/r1.json") $(num '.ranks.scaling_efficiency > 1' rn)" = "d2h true" ]

# --- the reduce-scatter runs on a stream of its own (cuda_nccl.cu): under the backward a rank
# waits only for the last two units' share of it (layer 0, the embedding: red (P_L + P_E)/N), and
# past the backward's compute the collective is what bounds the step. Three collective rates, the
# speculative step off (its window is the compute, which the collective no longer lengthens).
for rate in 450 60 2; do
  jq --argjson r $rate '.multi.collective_gbps = $r' experiments/hardware/hgx-h100-8x.json > "$TMP/coll$rate.json"
  plan "${std[@]}" --batch 32 --speculative-step false --hardware "$TMP/coll$rate.json" --gpus 2 > "$TMP/c$rate.json"
done
PE=$(jq ".vocab_size * .hidden_size" $M) # the embedding's params
tail_of() { num ".ranks.reduce_scatter_ms * (.params_per_layer + $PE) / .params" "$1"; }
grew=$(awk -v a="$(num .ranks.rank_step_ms c60)" -v b="$(num .ranks.rank_step_ms c450)" 'BEGIN { printf "%.17g", a - b }')
want=$(awk -v a="$(tail_of c60)" -v b="$(tail_of c450)" 'BEGIN { printf "%.17g", a - b }')
check "collective 450 -> 60 GB/s, under the compute ($(num .ranks.reduce_scatter_ms c60) ms): the step grows by the tail only ($grew ms, want $want)" \
  close "$grew" "$want"
check "... and the compute bounds it: $(num .bound c60)" [ "$(num .bound c60)" = compute ]
check "collective at 2 GB/s: the collective bounds the step: $(num .bound c2)" [ "$(num .bound c2)" = collective ]
check "... which is then at least G x the reduce-scatter and its tail" \
  le "$(awk -v g="$(num .grad_accum c2)" -v r="$(num .ranks.reduce_scatter_ms c2)" -v t="$(tail_of c2)" \
    'BEGIN { printf "%.17g", g * r + t }')" "$(num .ranks.rank_step_ms c2)"
check "... and the plan's formula names it" grep -q "max(c_b, W/(f\*h2d), Wg/(f\*d2h), red)" <(num .prediction.formula c2)

# --- more hosts never need more host memory per host than one (the state sharded); host 0 holds what each does
prev=
for h in 1 2 4 8; do
  plan "${std[@]}" --batch 64 --hardware $NV --gpus 2 --hosts $h > "$TMP/h.json"
  per=$(num .ranks.host_bytes_per_host h)
  if [ -n "$prev" ]; then check "--hosts $h: $per bytes per host > $prev with fewer hosts" le "$per" "$prev"; fi
  prev=$per
  if [ $h -gt 1 ]; then
    check "--hosts $h: host 0 = any host" close "$(num .ranks.host0_bytes h)" "$(num .ranks.host_bytes_per_host h)"
    check "--hosts $h: a host = unsharded - (H-1)/H of m, v (8 B/param)" close "$(num .ranks.host_bytes_per_host h)" \
      "$(num ".ranks.across_hosts.unsharded_bytes_per_host - ($h - 1) / $h * 8 * .params" h)"
    check "--hosts $h: host 0's bytes are the plan's host_bytes" close "$(num .host_bytes h)" "$(num .ranks.host0_bytes h)"
  fi
done

# --- the bytes and times the formulas say. Tiny fixture rates: link 50 GB/s per GPU, uplink 50 per
# 2 GPUs, NVLink 400, NIC 25, host memory 1000 GB/s; paper precision: bf16 gradients (2 B).
for n in 2 4; do
  for hw in $NV $PC; do
    plan "${std[@]}" --batch $((4 * n)) --grad-accum 2 --hardware $hw --gpus $n > "$TMP/f.json"
    P=$(num .params f); PL=$(num .params_per_layer f); L=$(num .layers f)
    rs=$(awk -v P=$P -v n=$n 'BEGIN { printf "%.17g", 2 * (n - 1) / n * P * 2 }')        # G = 2 micro-batches
    check "$hw --gpus $n: each GPU's uplink share 50/2" close "$(num .ranks.h2d_gbps_per_gpu f)" 25
    check "$hw --gpus $n: reduce-scatter bytes G (N-1)/N P 2" close "$(num .ranks.reduce_scatter_bytes_per_gpu f)" "$rs"
    rate=$([ $hw = $NV ] && echo 400 || echo 25) # NVLink, or the ring over the rank's PCIe share
    check "$hw --gpus $n: collective at $rate GB/s" close "$(num .ranks.collective_gbps f)" $rate
    check "$hw --gpus $n: reduce-scatter time = bytes / rate" close "$(num .ranks.reduce_scatter_ms f)" \
      "$(awk -v b=$rs -v r=$rate 'BEGIN { printf "%.17g", b / (r * 1e6) }')"
    check "$hw --gpus $n: each GPU copies out 1/N of every gradient" close "$(num .ranks.d2h_bytes_per_gpu f)" \
      "$(awk -v P=$P -v PL=$PL -v L=$L -v n=$n 'BEGIN { printf "%.17g", (2 * L * PL * 2 + (P - L * PL) * 2) / n }')"
    check "$hw --gpus $n: host traffic = N (h2d + d2h) + AdamW 22 B/param" close "$(num .ranks.host_traffic_bytes f)" \
      "$(num "$n * (.ranks.h2d_bytes_per_gpu + .ranks.d2h_bytes_per_gpu) + 22 * .params" f)"
  done
done
plan "${std[@]}" --batch 8 --hardware $NV --gpus 1 --hosts 4 > "$TMP/x.json"
P=$(num .params x)
check "--hosts 4: each host's NIC moves 2 (H-1)/H of the gradient" close "$(num .ranks.across_hosts.link_bytes_per_host x)" \
  "$(awk -v P=$P 'BEGIN { printf "%.17g", 2 * 3 / 4 * P * 2 }')"
check "--hosts 4: a micro-batch's reduce-scatter = 3/4 S/nic + (2 + 5/4) S/mem" \
  close "$(num .ranks.across_hosts.reduce_scatter_ms x)" \
  "$(awk -v P=$P 'BEGIN { S = 2 * P; printf "%.17g", 0.75 * S / 25e6 + 3.25 * S / 1000e6 }')"
check "--hosts 4, one GPU a host: the gradients sliced, summed under the backward" \
  [ "$(num '.ranks.across_hosts.grads_sliced and .ranks.across_hosts.under_backward_ms > 0' x)" = true ]
check "--hosts 4: exposed = max(G rs - backward, the embedding's share of rs)" close "$(num .ranks.across_hosts.ms x)" \
  "$(num '[.ranks.across_hosts.reduce_scatter_ms * .grad_accum - .ranks.across_hosts.under_backward_ms,
           .ranks.across_hosts.reduce_scatter_ms * 152064 * 3584 / .params] | max' x)"
check "--hosts 4, one GPU a host: a host = unsharded - 3/4 of m, v and the gradients (10 B/param)" \
  close "$(num .ranks.host_bytes_per_host x)" "$(num '.ranks.across_hosts.unsharded_bytes_per_host - 0.75 * 10 * .params' x)"
plan "${std[@]}" --batch 8 --hardware $NV --gpus 2 --hosts 4 > "$TMP/x2.json"
check "--gpus 2 --hosts 4: the gradients whole, the sum after the backward (exposed whole)" \
  [ "$(num '(.ranks.across_hosts.grads_sliced | not) and .ranks.across_hosts.ms == .ranks.across_hosts.reduce_scatter_ms' x2)" = true ]
check "--hosts 4: gather ms = 3/4 S/nic + 6/4 S/mem, in the optimizer" close "$(num .ranks.across_hosts.gather_ms x)" \
  "$(awk -v P=$P 'BEGIN { S = 2 * P; printf "%.17g", 0.75 * S / 25e6 + 1.5 * S / 1000e6 }')"
check "--hosts 4: the step adds the hosts' sum to the rank's" close "$(num .step_ms x)" "$(num '.ranks.rank_step_ms + .ranks.across_hosts.ms' x)"
check "--hosts 4: Qwen2.5-7B's 1.09 GB embedding is no limit (the sum goes in rounds)" \
  [ "$(num '.ranks.across_hosts.largest_unit_bytes > 1073741824 and (.short // [] | all(.resource != "mpi_unit"))' x)" = true ]

# --- the 120B-class model on hosts of one H200 each (h200-128g's measured rates, --nic-gbps 50): the
# parameters are whole on every host (220 GB), the moments and gradients' sums 1/H, so 4 hosts of
# 512 GiB hold it and 2 do not; hosts of 256 GiB never do. A bad --nic-gbps is refused.
big() { plan --config experiments/models/dense-120b.json --seq-len 1024 --precision paper --hardware h200-128g \
  --nic-gbps 50 --batch $((8 * $1)) --hosts $1 --host-mem-gb $2; }
big 4 549.755813888 > "$TMP/b4.json"
check "120B, 4 hosts of 512 GiB: fits" [ "$(num '.fits and .ranks.across_hosts.grads_sliced' b4)" = true ]
check "120B, 4 hosts: a host holds 220 GB of parameters + 1/4 of 10 B/param + buffers (< 0.95 x 512 GiB)" \
  [ "$(num '.ranks.host0_bytes > 2.5 * .params and .ranks.host0_bytes < 0.95 * 549755813888' b4)" = true ]
check "120B, 4 hosts: the NIC override is the one priced" [ "$(num '.hardware.nic_override_gbps' b4)" = 50 ]
check "120B, 4 hosts, 8 rows a host: the memory's part alone outlasts the backward (no NIC hides the sum)" \
  [ "$(num '.ranks.across_hosts.nic_gbps_to_hide' b4)" = 0 ]
plan --config experiments/models/dense-120b.json --seq-len 1024 --precision paper --hardware h200-128g \
  --nic-gbps 50 --batch 128 --hosts 4 > "$TMP/b32.json"
nic=$(num '.ranks.across_hosts.nic_gbps_to_hide' b32)
check "120B, 4 hosts, 32 rows a host: a NIC rate hides the sum ($nic GB/s)" [ "$(jq -n "$nic > 0")" = true ]
plan --config experiments/models/dense-120b.json --seq-len 1024 --precision paper --hardware h200-128g \
  --nic-gbps "$nic" --batch 128 --hosts 4 > "$TMP/bn.json"
check "... at that rate (a float option: 1e-6) G x the reduce-scatter equals the backward it runs under" \
  [ "$(num '.ranks.across_hosts | (.reduce_scatter_ms / .under_backward_ms - 1) | fabs < 1e-6' bn)" = true ]
big 2 549.755813888 > "$TMP/b2.json"
check "120B, 2 hosts of 512 GiB: does not fit" [ "$(num '.fits' b2)" = false ]
big 8 274.877906944 > "$TMP/b8.json"
check "120B, 8 hosts of 256 GiB: does not fit (the parameters alone are 220 GB)" [ "$(num '.fits' b8)" = false ]
"$MT" plan --config experiments/models/dense-120b.json --hardware h200-128g --hosts 4 --batch 4 --nic-gbps -3 \
  > /dev/null 2> "$TMP/nic.err"
check "--nic-gbps -3: refused" [ $? -eq 2 ]
check "--nic-gbps -3: says why" grep -q -- "--nic-gbps" "$TMP/nic.err"

# --- --tokens-per-day: the fewest GPUs, then hosts, that reach the target
for n in 1 2 3; do plan "${std[@]}" --batch $((8 * n)) --hardware $NV --gpus $n > "$TMP/t$n.json"; done
t2=$(num '.tokens_per_s * 86400' t2); t3=$(num '.tokens_per_s * 86400' t3)
target=$(awk -v a=$t2 -v b=$t3 'BEGIN { printf "%.0f", (a + b) / 2 }')
plan "${std[@]}" --batch 8 --hardware $NV --tokens-per-day $target > "$TMP/t.json"
check "--tokens-per-day between 2 and 3 GPUs' rates picks 3" [ "$(num '.tokens_per_day.gpus, .tokens_per_day.hosts, .ranks.gpus, .batch' t | tr '\n' ' ')" = "3 1 3 24 " ]
check "--tokens-per-day lists the 3 candidates it compared, the last reaching it" \
  [ "$(num '[.tokens_per_day.candidates[] | .tokens_per_day >= '$target'] | map(tostring) | join(",")' t)" = "false,false,true" ]
check "--tokens-per-day: reached, and the host memory stated" [ "$(num '.tokens_per_day.reached and (.ranks.host0_bytes > 0)' t)" = true ]
plan "${std[@]}" --batch 8 --hardware $NV --tokens-per-day 1 > "$TMP/t.json"
check "--tokens-per-day 1: one GPU, no ranks object" [ "$(num '[.tokens_per_day.gpus, (.ranks == null)] | map(tostring) | join(",")' t)" = "1,true" ]
check "--tokens-per-day 1: its one-GPU candidate (ranks.c at N = H = 1) is the one-GPU plan's rate" \
  close "$(num '.tokens_per_day.candidates[0].tokens_per_s' t)" "$(num .tokens_per_s t)"
s3=(--config experiments/models/qwen2.5-3b.json --seq-len 1024 --precision paper)
t8=$(plan "${s3[@]}" --batch 64 --hardware $NV --gpus 8 | jq '.tokens_per_s * 86400')
plan "${s3[@]}" --batch 8 --hardware $NV --tokens-per-day "$(awk -v t=$t8 'BEGIN { printf "%.0f", t * 1.5 }')" > "$TMP/t.json"
check "--tokens-per-day past one host's 8 GPUs: whole hosts of 8" [ "$(num '.tokens_per_day.gpus == 8 and .tokens_per_day.hosts > 1 and .tokens_per_day.reached' t)" = true ]
check "--tokens-per-day: every candidate before the choice falls short, the choice reaches it" \
  [ "$(num '.tokens_per_day as $t | [$t.candidates[:-1][] | .tokens_per_day < $t.target] + [$t.candidates[-1].tokens_per_day >= $t.target] | all' t)" = true ]
plan "${std[@]}" --batch 16 --hardware $NV --gpus 8 --hosts 2 > "$TMP/t.json"
check "--hosts 2 with 7B: no mpi_unit shortfall" [ "$(num '.short // [] | all(.resource != "mpi_unit")' t)" = true ]
jq 'del(.multi.nic_gbps)' $NV > "$TMP/nonic.json"
plan "${std[@]}" --batch 8 --hardware "$TMP/nonic.json" --tokens-per-day 1e15 > "$TMP/t.json"
check "--tokens-per-day out of reach on one host: reached false, exit 0" [ "$(num '"\(.tokens_per_day.reached) \(.tokens_per_day.gpus)"' t)" = "false 8" ]

# --- bad input: one line, exit 2
one_line() { # one_line NEEDLE ARGS...
  local needle=$1; shift
  "$MT" plan "$@" > "$TMP/out" 2> "$TMP/err"; local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l < "$TMP/err")" -ne 1 ] || ! grep -qF -- "$needle" "$TMP/err"; then
    bad "plan $*: exit $rc, want 2 and one line with '$needle': $(cat "$TMP/err")"; else ok; fi
}
one_line "--gpus: expected a positive integer" "${std[@]}" --batch 8 --hardware $NV --gpus 0
one_line "--gpus: expected a positive integer" "${std[@]}" --batch 8 --hardware $NV --gpus -2
one_line "--hosts: expected a positive integer" "${std[@]}" --batch 8 --hardware $NV --hosts 0
one_line "--hosts: expected a positive integer" "${std[@]}" --batch 8 --hardware $NV --hosts -1
one_line "--tokens-per-day" "${std[@]}" --batch 8 --hardware $NV --tokens-per-day 0
one_line "--tokens-per-day" "${std[@]}" --batch 8 --hardware $NV --tokens-per-day -5
one_line "has no multi.gpus_per_host" "${std[@]}" --batch 8 --hardware h100-128g --gpus 2
one_line "has no multi.nic_gbps" "${std[@]}" --batch 8 --hardware "$TMP/nonic.json" --hosts 2
jq 'del(.multi.pcie_switch_uplink_gbps)' $NV > "$TMP/noup.json"
one_line "has no multi.pcie_switch_uplink_gbps" "${std[@]}" --batch 8 --hardware "$TMP/noup.json" --gpus 2
one_line "has 8 GPUs per host" "${std[@]}" --batch 16 --hardware $NV --gpus 16
one_line "not divisible by 4 GPUs x 1 hosts" "${std[@]}" --batch 6 --hardware $NV --gpus 4
one_line "--gpus auto" "${std[@]}" --batch 8 --hardware $NV --gpus auto
one_line "picks --gpus and --hosts itself" "${std[@]}" --batch 8 --hardware $NV --gpus 2 --tokens-per-day 1e9
one_line "needs --hardware" "${std[@]}" --batch 8 --gpus 2
one_line "--batch auto with --gpus/--hosts" "${std[@]}" --batch auto --hardware $NV --gpus 2
one_line "no model of its several-GPU mode" --config $M --seq-len 1024 --batch 8 --hardware $NV --gpus 2 --peer deepspeed-zero3
expect 2 "--hosts" train --config $DATA/tiny5_llama.json --backend cpu --batch 2 --steps 1 --hosts 2

finish
