#!/usr/bin/env bash
# Every schedule and engine switch reaches bitwise-identical parameters and
# Adam moments on the CPU backend (same kernels, same operation order), in each
# precision mode, with gradient accumulation (G = 2), and at G = 1 each --recompute
# policy against full.
source "$(dirname "$0")/lib.sh"

run() { # run OUTDIR ARGS...
  local out=$1; shift
  "$MT" train "$@" --data $FIX/tokens.bin --batch 2 --seq-len 32 --steps 3 --grad-accum 2 --lr 1e-3 \
    --backend cpu --save "$out" > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}

for model in "--model $FIX/tiny_qwen2" "--config $DATA/tiny5_llama.json --seed 7"; do
  for prec in fp32 paper mixed; do
    tag=$(echo "$model $prec" | tr -c 'a-z0-9' '_')
    ref=$TMP/ref_$tag
    check "resident run ($model, $prec)" run "$ref" $model --precision $prec --schedule resident
    i=0
    for variant in "megatrain" "megatrain --weight-buffers 3" "megatrain --checkpoint-interval 2" \
                   "megatrain --checkpoint-interval 2 --weight-buffers 3" "megatrain --serial-optimizer --grad-slabs 1" "megatrain --bind copy" "megatrain --weight-buffers 1" \
                   "megatrain --offload-checkpoints true" "megatrain --offload-checkpoints true --weight-buffers 3" \
                   "megatrain --recompute none" "megatrain --recompute swiglu --weight-buffers 1" \
                   "megatrain --recompute mlp --weight-buffers 3" "megatrain --recompute norms" "naive --recompute none" \
                   "naive" "naive --checkpoint-interval 2" "zero3" \
                   "zero3 --zero3-prefetch-bucket-size 1000 --zero3-overlap-comm false --zero3-pin-memory false" \
                   "zero3 --zero3-prefetch-bucket-size 1e9 --zero3-max-live-parameters 2e4 --grad-slabs 2"; do
      i=$((i + 1))
      out=$TMP/mt_${tag}_$i
      check "run ($model, $prec, --schedule $variant)" run "$out" $model --precision $prec --schedule $variant
      check "--schedule $variant == resident ($model, $prec): parameters and moments bitwise" same_state "$out" "$ref"
    done
  done
done
# K = 3 on 5 layers: blocks of 3 and 2.
check "K=3 run" run "$TMP/k3" --config $DATA/tiny5_llama.json --seed 7 --precision fp32 --checkpoint-interval 3
check "K=3 == resident" same_state "$TMP/k3" "$TMP/ref_$(echo "--config $DATA/tiny5_llama.json --seed 7 fp32" | tr -c 'a-z0-9' '_')"
# --recompute at G = 1: every policy (none keeps SwiGLU's product, swiglu the gate/up output, norms
# that but not the norms' outputs, mlp the layers but their MLP and norms, auto what fits) gives full's parameters and moments bitwise, with the
# MLP in chunks (the kept tensors are written and read a chunk at a time).
run1() { # run1 OUTDIR ARGS...
  local out=$1; shift
  "$MT" train "$@" --data $FIX/tokens.bin --batch 2 --seq-len 32 --steps 3 --lr 1e-3 --backend cpu --save "$out" \
    > "$out.jsonl" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
}
for prec in fp32 paper mixed; do
  check "G=1 full ($prec)" run1 "$TMP/g1_full_$prec" --model $FIX/tiny_qwen3 --precision $prec --mlp-chunk 16
  for r in mlp norms swiglu none auto; do
    check "G=1 --recompute $r ($prec)" run1 "$TMP/g1_${r}_$prec" --model $FIX/tiny_qwen3 --precision $prec --mlp-chunk 16 \
      --recompute $r
    check "G=1 --recompute $r == full ($prec): bitwise" same_state "$TMP/g1_${r}_$prec" "$TMP/g1_full_$prec"
  done
done
check "train --recompute auto says its choice on stderr" grep -q "recompute auto: none" "$TMP/g1_auto_fp32.err"
finish
