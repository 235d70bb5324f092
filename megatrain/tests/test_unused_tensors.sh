#!/usr/bin/env bash
# A tensor in --model's weights that the model does not use is an error naming it
# (issue 29, class 5): Qwen2 weights under model_type llama (their q/k/v biases),
# an lm_head.weight beside tie_word_embeddings: true, any unknown extra tensor;
# --model of train and eval alike. --allow-unused-tensors drops them with one note
# naming them (a --save then leaves them out). RoPE's inv_freq buffer, which older
# HF Llama saves hold and transformers skips, is not counted.
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { echo "skipped: no jq"; exit 77; }

# add_tensor SRC DST NAME D0 [D1]: DST is the safetensors file SRC plus an F32 tensor NAME of that shape.
add_tensor() {
  python3 - "$@" <<'PY'
import json, struct, sys
src, dst, name, shape = sys.argv[1], sys.argv[2], sys.argv[3], [int(d) for d in sys.argv[4:]]
b = open(src, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
count = 1
for d in shape: count *= d
h[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * count]}
data += struct.pack("<%df" % count, *([0.5] * count))
t = json.dumps(h, separators=(",", ":")).encode()
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + data)
PY
}
data=(--data $FIX/tokens.bin --batch 2 --seq-len 16 --backend cpu)

# --- Qwen2 weights with model_type llama: its six q/k/v biases are named, and why.
q=$TMP/qwen_as_llama; cp -r $FIX/tiny_qwen2 "$q"
jq '.model_type = "llama" | .architectures = ["LlamaForCausalLM"]' $FIX/tiny_qwen2/config.json > "$q/config.json"
why="(config.json: model_type llama without attention_bias has no q/k/v biases; Qwen2 weights need model_type qwen2)"
expect 1 "$q/model.safetensors: 6 tensors the model does not use: model.layers.0.self_attn.k_proj.bias, model.layers.0.self_attn.q_proj.bias, model.layers.0.self_attn.v_proj.bias, model.layers.1.self_attn.k_proj.bias, and 2 more $why" \
  train --model "$q" "${data[@]}" --steps 1
check "the error says how to go on" grep -qF -- "--allow-unused-tensors" "$TMP/err"
expect 1 "6 tensors the model does not use" eval --model "$q" "${data[@]}"
# ...and as themselves (model_type qwen2) they load.
expect 0 "" train --model $FIX/tiny_qwen2 "${data[@]}" --steps 1
# With the option: one note naming them, the run goes on, the save leaves them out.
"$MT" train --model "$q" "${data[@]}" --steps 1 --allow-unused-tensors --save "$TMP/q_saved" > /dev/null 2> "$TMP/err"
rc=$?
check "--allow-unused-tensors: exit 0 (got $rc: $(tail -n 1 "$TMP/err"))" test $rc -eq 0
check "--allow-unused-tensors: one note naming them" \
  test "$(grep -c "note: $q/model.safetensors: 6 tensors the model does not use: model.layers.0.self_attn.k_proj.bias" "$TMP/err")" = 1
check "the note says the save goes without them" grep -qF "dropped (--allow-unused-tensors)" "$TMP/err"
python3 -c "import json,struct,sys; b=open(sys.argv[1],'rb').read(); h=json.loads(b[8:8+struct.unpack('<Q',b[:8])[0]]); sys.exit(any('bias' in k for k in h))" \
  "$TMP/q_saved/model.safetensors"
check "the save holds no bias" test $? -eq 0
expect 0 "" eval --model "$q" "${data[@]}" --steps 2 --allow-unused-tensors

# --- lm_head.weight beside tie_word_embeddings: true (tiny_llama is tied).
t=$TMP/tied_head; cp -r $FIX/tiny_llama "$t"
add_tensor $FIX/tiny_llama/model.safetensors "$t/model.safetensors" lm_head.weight 256 64
expect 1 "$t/model.safetensors: 1 tensor the model does not use: lm_head.weight (config.json sets tie_word_embeddings: true" \
  train --model "$t" "${data[@]}" --steps 1
expect 1 "lm_head.weight" eval --model "$t" "${data[@]}"

# --- an unknown extra tensor, in a single file and in a sharded set (the index is named).
x=$TMP/extra; cp -r $FIX/tiny_llama "$x"
add_tensor $FIX/tiny_llama/model.safetensors "$x/model.safetensors" model.layers.0.mlp.gate_proj.lora_A 4 64
expect 1 "$x/model.safetensors: 1 tensor the model does not use: model.layers.0.mlp.gate_proj.lora_A. HINT:" \
  train --model "$x" "${data[@]}" --steps 1
"$MT" train --model $FIX/tiny_llama "${data[@]}" --steps 1 --shard-size 200kB --save "$TMP/sh" > /dev/null 2>&1
s=$TMP/sh_extra; mkdir -p "$s"; cp "$TMP/sh"/config.json "$TMP/sh"/model* "$s/"
add_tensor "$TMP/sh/model-00003-of-00003.safetensors" "$s/model-00003-of-00003.safetensors" extra.weight 2
jq '.weight_map["extra.weight"] = "model-00003-of-00003.safetensors"' "$TMP/sh/model.safetensors.index.json" > "$s/model.safetensors.index.json"
expect 1 "$s/model.safetensors.index.json: 1 tensor the model does not use: extra.weight" train --model "$s" "${data[@]}" --steps 1

# --- RoPE's inv_freq buffer (older HF Llama saves) is not a weight: loaded without a word.
r=$TMP/inv_freq; cp -r $FIX/tiny_llama "$r"
add_tensor $FIX/tiny_llama/model.safetensors "$r/model.safetensors" model.layers.0.self_attn.rotary_emb.inv_freq 8
expect 0 "" train --model "$r" "${data[@]}" --steps 1
check "no note about inv_freq" bash -c "! grep -q 'does not use' '$TMP/err'"
finish
