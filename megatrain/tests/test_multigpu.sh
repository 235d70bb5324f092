#!/usr/bin/env bash
# --gpus N on the cpu backend (N backend instances in one process, a thread each, one host
# copy of the state; docs/DESIGN.md#several-gpus):
# - bitwise: N ranks at global batch B with G micro-batches reach the parameters and Adam
#   moments (and losses) of one rank at batch B/N with N x G micro-batches (the host adds the
#   ranks' gradients micro-batch-major then in rank order, as one rank adds its micro-batches),
#   N = 2, 3 and 8 (auto), every precision, G = 1 and 2, and across schedules;
# - within tolerance of one rank at batch B (one GEMM over all rows: another summation order):
#   parameters' relative L2 difference <= 1e-5 in fp32, <= 5e-3 with bf16 gradients (paper,
#   mixed: each micro-batch's add rounds to bf16);
# - a checkpoint saved under --gpus 2 resumes under --gpus 1 and 3 bitwise where the resumed
#   run splits the rows the same way (slices of one row), within tolerance where it does not;
# - the host-memory check counts one state and N ranks' buffers;
# - bad --gpus values: one line, non-zero exit.
source "$(dirname "$0")/lib.sh"

run() { # run OUTDIR ARGS...
  local out=$1; shift
  "$MT" train "$@" --data $FIX/tokens.bin --seq-len 32 --lr 1e-3 --backend cpu --save "$out" \
    > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}
losses() { jq -r '"\(.step) \(.loss) \(.grad_norm) \(.skipped)"' "$1"; }
same_losses() { test "$(losses "$1.jsonl")" = "$(losses "$2.jsonl")"; }

tiny5="--config $DATA/tiny5_llama.json --seed 7"
for prec in fp32 paper mixed; do
  for G in 1 2; do
    for N in 2 3; do
      t=${prec}_g${G}_n${N}
      check "--gpus $N ($prec, G=$G)" run "$TMP/n_$t" $tiny5 --precision $prec --steps 3 --gpus $N --batch 6 --grad-accum $G
      check "one rank, $N x $G micro-batches ($prec)" run "$TMP/r_$t" $tiny5 --precision $prec --steps 3 \
        --batch $((6 / N)) --grad-accum $((G * N))
      check "--gpus $N == one rank's $((G * N)) micro-batches of $((6 / N)) rows ($prec, G=$G): bitwise" same_state "$TMP/n_$t" "$TMP/r_$t"
      check "--gpus $N ($prec, G=$G): losses and norms identical" same_losses "$TMP/n_$t" "$TMP/r_$t"
    done
  done
  tol=5e-3; [ $prec = fp32 ] && tol=1e-5
  check "one rank, batch 6 ($prec)" run "$TMP/b6_$prec" $tiny5 --precision $prec --steps 3 --batch 6
  check "--gpus 2 vs one micro-batch of 6 rows ($prec): within $tol" close_params "$TMP/n_${prec}_g1_n2" "$TMP/b6_$prec" $tol differ
done
check "the run says its ranks on stderr" grep -q "x 2 devices" "$TMP/n_fp32_g1_n2.err"

# Schedules and switches under --gpus 2 (tied embeddings: tiny_qwen2), each against one rank.
for variant in "megatrain --speculative-step false" "megatrain --speculative-step true --grad-clip 0.5" \
               "megatrain --checkpoint-interval 2 --weight-buffers 3" "naive" "zero3" "resident"; do
  t=$(echo "$variant" | tr -c 'a-z0-9' '_')
  check "--gpus 2 --schedule $variant" run "$TMP/v_$t" --model $FIX/tiny_qwen2 --precision paper --steps 3 --gpus 2 \
    --batch 4 --grad-accum 2 --schedule $variant
  check "one rank --schedule $variant" run "$TMP/w_$t" --model $FIX/tiny_qwen2 --precision paper --steps 3 --batch 2 \
    --grad-accum 4 --schedule $variant
  check "--gpus 2 --schedule $variant == one rank: bitwise" same_state "$TMP/v_$t" "$TMP/w_$t"
done

# --gpus auto: every device the cpu backend offers (8).
check "--gpus auto" run "$TMP/auto" $tiny5 --precision mixed --steps 2 --gpus auto --batch 8
check "one rank, 8 micro-batches" run "$TMP/auto_ref" $tiny5 --precision mixed --steps 2 --batch 1 --grad-accum 8
check "--gpus auto (8) == one rank's 8 micro-batches: bitwise" same_state "$TMP/auto" "$TMP/auto_ref"
check "--gpus auto says 8 devices" grep -q "x 8 devices" "$TMP/auto.err"

# Resume: saved at step 3 under --gpus 2 (batch 2: slices of one row, 3 micro-batches).
for prec in fp32 paper; do
  ref=$TMP/res_ref_$prec half=$TMP/res_half_$prec
  check "uninterrupted --gpus 2 ($prec)" run "$ref" $tiny5 --precision $prec --steps 6 --gpus 2 --batch 2 --grad-accum 3
  check "first half under --gpus 2 ($prec)" run "$half" $tiny5 --precision $prec --steps 3 --gpus 2 --batch 2 --grad-accum 3
  for args in "--gpus 2" "--gpus 1 --batch 1 --grad-accum 6" "--gpus 3 --batch 3 --grad-accum 2"; do
    t=$(echo "$args $prec" | tr -c 'a-z0-9' '_')
    "$MT" train --resume "$half" --steps 6 $args --save "$TMP/r_$t" > "$TMP/r_$t.jsonl" 2> "$TMP/r_$t.err"
    check "resume under $args ($prec)" test $? -eq 0
    check "resume under $args == uninterrupted --gpus 2 ($prec): bitwise" same_state "$TMP/r_$t" "$ref"
    check "resume under $args: losses of steps 4..6 identical ($prec)" \
      test "$(losses "$TMP/r_$t.jsonl")" = "$(losses "$ref.jsonl" | tail -n 3)"
  done
  # The checkpoint's own batch (2 rows) under --gpus 1: one micro-batch slice of 2 rows, another order.
  tol=5e-3; [ $prec = fp32 ] && tol=1e-5
  "$MT" train --resume "$half" --steps 6 --gpus 1 --save "$TMP/r1_$prec" > "$TMP/r1_$prec.jsonl" 2> /dev/null
  check "resume under --gpus 1, the saved batch ($prec)" test $? -eq 0
  check "resume under --gpus 1, the saved batch: within $tol of --gpus 2 ($prec)" close_params "$TMP/r1_$prec" "$ref" $tol differ
done
expect 1 "--batch 2 is not divisible by --gpus 3" train --resume "$TMP/res_half_fp32" --steps 6 --gpus 3

# The host-memory check before allocation: one model state, N ranks' slabs, staging and (on the
# cpu backend, in host memory) device buffers. MT_HOST_MEM_LIMIT stands in for a small machine.
jq '.num_hidden_layers = 1 | .max_window_layers = 1' experiments/models/qwen2.5-3b.json > "$TMP/m3b.json"
for g in 1 2; do
  MT_HOST_MEM_LIMIT=1000000 "$MT" train --config "$TMP/m3b.json" --backend cpu --precision paper --batch 4 --seq-len 256 \
    --steps 1 --gpus $g > /dev/null 2> "$TMP/mem$g.err"
  check "--gpus $g on a 1 MB machine: refused before allocating" grep -q "nothing was allocated" "$TMP/mem$g.err"
done
need() { sed -n "s/.*needs \([0-9.]*\) GiB.*/\1/p" "$1"; }
state() { sed -n "s/.*model state \([0-9.]* [KMG]iB\),.*/\1/p" "$1"; }
check "--gpus 2: one model state, as --gpus 1" test "$(state "$TMP/mem2.err")" = "$(state "$TMP/mem1.err")"
check "--gpus 2 needs more than --gpus 1 (two ranks' buffers): $(need "$TMP/mem2.err") vs $(need "$TMP/mem1.err") GiB" \
  awk -v a="$(need "$TMP/mem2.err")" -v b="$(need "$TMP/mem1.err")" 'BEGIN { exit !(a > b) }'
check "--gpus 2: the message says the ranks" grep -q "staging [0-9.]* [KMG]iB for 2 ranks" "$TMP/mem2.err"

# Bad input: one line, non-zero exit.
base=(train $tiny5 --data $FIX/tokens.bin --seq-len 32 --steps 1 --backend cpu)
expect 2 "--gpus: expected a positive integer" "${base[@]}" --batch 4 --gpus 0
expect 2 "--gpus: expected a positive integer" "${base[@]}" --batch 4 --gpus -2
expect 2 "--gpus: expected a positive integer" "${base[@]}" --batch 4 --gpus two
expect 2 "--gpus: missing value" "${base[@]}" --batch 4 --gpus
expect 2 "--gpus 9: --backend cpu has 8 devices here" "${base[@]}" --batch 9 --gpus 9
expect 2 "--batch 5 is not divisible by --gpus 2" "${base[@]}" --batch 5 --gpus 2
expect 2 "is given twice" "${base[@]}" --batch 4 --gpus 2 --gpus 2
expect 2 "--gpus 2: --backend sim simulates one GPU" train $tiny5 --steps 1 --batch 4 --backend sim \
  --hardware h100-128g --gpus 2
expect 2 "option --gpus does not apply to \`megatrain eval\`" eval --model $FIX/tiny_llama --data $FIX/tokens.bin \
  --batch 2 --seq-len 32 --gpus 2
finish
