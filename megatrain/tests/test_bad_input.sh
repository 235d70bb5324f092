#!/usr/bin/env bash
# Bad input gets exit status 1..125 and one stderr line naming the file or the
# option and what is wrong: never a crash, never a partial file.
source "$(dirname "$0")/lib.sh"

# expect_error NAME NEEDLE ARGS...: runs megatrain ARGS, wants a clean failure
# whose single stderr line contains NEEDLE.
expect_error() {
  local name=$1 needle=$2; shift 2
  "$MT" "$@" > "$TMP/out" 2> "$TMP/err"
  local rc=$?
  last_rc=$rc
  local lines; lines=$(wc -l < "$TMP/err")
  if [ $rc -lt 1 ] || [ $rc -gt 125 ]; then bad "$name: exit status $rc (want 1..125)"; cat "$TMP/err" >&2; return; fi
  if [ "$lines" -ne 1 ]; then bad "$name: $lines stderr lines (want 1)"; cat "$TMP/err" >&2; return; fi
  if ! grep -qF -- "$needle" "$TMP/err"; then bad "$name: stderr lacks '$needle': $(cat "$TMP/err")"; return; fi
  if [ -s "$TMP/out" ]; then bad "$name: wrote to stdout: $(head -c 200 "$TMP/out")"; return; fi
  ok
}

D=$TMP/bad; mkdir -p "$D"
model=$FIX/tiny_llama
base=(--data $FIX/tokens.bin --batch 2 --seq-len 16 --steps 1 --backend cpu)

# --- model directory and config.json
expect_error "missing model dir" "$D/nope" train --model "$D/nope" "${base[@]}"
mkdir -p "$D/badjson"; echo '{"model_type": "llama", ' > "$D/badjson/config.json"
expect_error "malformed config.json" "$D/badjson/config.json" train --model "$D/badjson" "${base[@]}"
mkdir -p "$D/heads"; jq '.num_attention_heads = 3' $model/config.json > "$D/heads/config.json"; cp $model/model.safetensors "$D/heads/"
expect_error "heads not dividing" "$D/heads/config.json" train --model "$D/heads" "${base[@]}"
mkdir -p "$D/zero"; jq '.hidden_size = 0' $model/config.json > "$D/zero/config.json"
expect_error "zero hidden size" "hidden_size" train --model "$D/zero" "${base[@]}"
mkdir -p "$D/arch"; jq '.model_type = "gpt2"' $model/config.json > "$D/arch/config.json"
expect_error "unknown model_type" "gpt2" train --model "$D/arch" "${base[@]}"

# --- safetensors
mk() { mkdir -p "$D/$1"; cp $model/config.json "$D/$1/"; }
mk missing_st
expect_error "no safetensors" "$D/missing_st" train --model "$D/missing_st" "${base[@]}"
mk trunc; head -c 100000 $model/model.safetensors > "$D/trunc/model.safetensors"
expect_error "truncated safetensors" "$D/trunc/model.safetensors" train --model "$D/trunc" "${base[@]}"
mk empty; : > "$D/empty/model.safetensors"
expect_error "empty safetensors" "$D/empty/model.safetensors" train --model "$D/empty" "${base[@]}"
mk garbage; head -c 4096 /dev/urandom > "$D/garbage/model.safetensors"
expect_error "garbage safetensors" "$D/garbage/model.safetensors" train --model "$D/garbage" "${base[@]}"
# A larger config than the weights: every shape is wrong.
mk shape; jq '.intermediate_size = 128' $model/config.json > "$D/shape/config.json"; cp $model/model.safetensors "$D/shape/"
expect_error "wrong tensor shape" "mlp" train --model "$D/shape" "${base[@]}"
# One more layer than the file has: a missing tensor.
mk layers; jq '.num_hidden_layers = 3' $model/config.json > "$D/layers/config.json"; cp $model/model.safetensors "$D/layers/"
expect_error "missing tensor" "model.layers.2." train --model "$D/layers" "${base[@]}"

# --- data
printf 'abc' > "$D/odd.bin"
expect_error "data size not a multiple of 4" "$D/odd.bin" train --model $model --data "$D/odd.bin" --batch 2 --seq-len 16 --steps 1
head -c 64 $FIX/tokens.bin > "$D/short.bin"
expect_error "data shorter than one batch" "$D/short.bin" train --model $model --data "$D/short.bin" --batch 2 --seq-len 16 --steps 1
python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<100I', *([7]*50 + [256] + [7]*49)))" > "$D/oov.bin"
expect_error "token id >= vocab" "$D/oov.bin" train --model $model --data "$D/oov.bin" --batch 2 --seq-len 16 --steps 1
expect_error "missing data file" "$D/nodata.bin" train --model $model --data "$D/nodata.bin" --batch 2 --seq-len 16 --steps 1

# --- options
expect_error "batch 0" "--batch" train --model $model --data $FIX/tokens.bin --batch 0
expect_error "negative batch" "--batch" train --model $model --data $FIX/tokens.bin --batch -2
expect_error "seq-len not a number" "--seq-len" train --model $model --data $FIX/tokens.bin --seq-len abc
expect_error "negative lr" "--lr" train --model $model --data $FIX/tokens.bin --lr -1e-3
expect_error "beta1 >= 1" "--beta1" train --model $model --data $FIX/tokens.bin --beta1 1.5
expect_error "unknown option" "--frobnicate" train --model $model --frobnicate 3
expect_error "missing value" "--steps" train --model $model --steps
expect_error "unknown precision" "--precision" train --model $model "${base[@]}" --precision fp8
expect_error "unknown schedule" "--schedule" train --model $model "${base[@]}" --schedule pipelined
expect_error "unknown backend" "--backend" train --model $model --data $FIX/tokens.bin --batch 2 --seq-len 16 --backend tpu
expect_error "unknown attention" "--attention" train --model $model "${base[@]}" --attention flash
expect_error "cudnn attention on cpu" "--attention cudnn" train --model $model "${base[@]}" --attention cudnn
expect_error "unknown lr schedule" "--lr-schedule" train --model $model "${base[@]}" --lr-schedule linear
expect_error "checkpoint interval > layers" "--checkpoint-interval" train --model $model "${base[@]}" --checkpoint-interval 9
expect_error "unknown command" "fly" fly
expect_error "weight buffers out of range" "--weight-buffers" train --model $model "${base[@]}" --weight-buffers 4
# The budget check refuses before allocating, with the numbers (a 110B model on this machine's RAM).
expect_error "host memory budget" "host memory" train --config experiments/models/dense-120b.json --data synthetic --batch 1 --seq-len 16 --backend cpu
expect_error "zero3 bucket not a number" "--zero3-prefetch-bucket-size" train --model $model "${base[@]}" --schedule zero3 --zero3-prefetch-bucket-size lots
expect_error "zero3 bool not a bool" "--zero3-pin-memory" train --model $model "${base[@]}" --schedule zero3 --zero3-pin-memory maybe
expect_error "zero3 zero bucket" "--zero3" train --model $model "${base[@]}" --schedule zero3 --zero3-prefetch-bucket-size 0
expect_error "eval without data" "--data" eval --model $model --batch 2 --seq-len 16
expect_error "both --model and --config" "--config" train --model $model --config $model/config.json

# --- save / resume
expect_error "unwritable --save" "--save" train --model $model "${base[@]}" --save /proc/megatrain-test/out
check "no file left by the failed save" test ! -e /proc/megatrain-test
touch "$D/afile"
expect_error "--save under a file" "--save" train --model $model "${base[@]}" --save "$D/afile/out"
expect_error "resume from nothing" "$D/nockpt" train --resume "$D/nockpt" --steps 2
mkdir -p "$D/badstate"; echo '{"format": "megatrain-train-state", "version": 1}' > "$D/badstate/train_state.json"
expect_error "resume from a directory without checkpoint.json" "checkpoint.json" train --resume "$D/badstate" --steps 2

# --- issue 29, class 8: what used to pass in silence or be misnamed.
# rehead SRC DST PY: DST is SRC (a safetensors file) with its header JSON text
# rewritten by the Python expression PY over `h` (the text); the data is kept.
rehead() {
  python3 - "$@" <<'EOF2'
import struct, sys
src, dst, expr = sys.argv[1:4]
b = open(src, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = b[8:8 + n].decode()
h = eval(expr).encode()
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + b[8 + n:])
EOF2
}
mk emptymap; echo '{"metadata": {"total_size": 0}, "weight_map": {}}' > "$D/emptymap/model.safetensors.index.json"
expect_error "index with an empty weight_map" "$D/emptymap/model.safetensors.index.json: \"weight_map\" is empty" train --model "$D/emptymap" "${base[@]}"
mk metadup; rehead $model/model.safetensors "$D/metadup/model.safetensors" 'h.replace("\"format\":\"pt\"", "\"format\":\"pt\",\"format\":\"pt\"", 1)'
expect_error "a key twice in __metadata__" "$D/metadup/model.safetensors: __metadata__.format appears twice" train --model "$D/metadup" "${base[@]}"
# The same tensor twice, on the same bytes: named as a duplicate, not as an overlap.
mk namedup; rehead $model/model.safetensors "$D/namedup/model.safetensors" \
  'h.rstrip()[:-1] + ", " + h[h.index("\"model.norm.weight\""):].split("}", 1)[0] + "}}"'
expect_error "a tensor name twice" "$D/namedup/model.safetensors: tensor 'model.norm.weight' appears twice in the header" train --model "$D/namedup" "${base[@]}"
expect_error "--grad-accum too large" "--grad-accum 2147483647 x --batch 2 x --seq-len 16" train --model $model "${base[@]}" --grad-accum 2147483647
check "--grad-accum too large: exit 2" test "$last_rc" -eq 2
# Contradictions: exit 2, one line naming the options.
contra() { # contra NAME NEEDLE ARGS...
  local name=$1; expect_error "$@"; check "$name: exit 2 (got $last_rc)" test "$last_rc" -eq 2
}
contra "--init with --model" "--init random: the weights come from --model" train --model $model --init random "${base[@]}"
contra "--save-every without --save" "--save-every 2: needs --save DIR" train --model $model "${base[@]}" --save-every 2
contra "--shard-size without --save" "--shard-size: applies to what --save DIR writes" train --model $model "${base[@]}" --shard-size 1GB
contra "--save-layout without --save" "--save-layout host0: applies to what --save DIR writes" train --model $model "${base[@]}" --save-layout host0
contra "--save-layout bad" "--save-layout each: expected hosts or host0" train --model $model "${base[@]}" --save-layout each
contra "an option twice" "train: --lr is given twice" train --model $model "${base[@]}" --lr 1e-3 --lr 1e-3
contra "a flag twice" "--serial-optimizer is given twice" train --model $model "${base[@]}" --serial-optimizer --serial-optimizer
contra "eval option twice" "eval: --batch is given twice" eval --model $model --data $FIX/tokens.bin --batch 2 --batch 2 --seq-len 16
contra "plan option twice" "plan: --precision is given twice" plan --model $model --batch 1 --seq-len 16 --precision paper --precision fp32
contra "--allow-unused-tensors without --model" "--allow-unused-tensors: applies to the weights --model DIR reads" \
  train --config $model/config.json "${base[@]}" --allow-unused-tensors
# eval --steps past the file is refused (it was cut to the file's 255 windows in silence).
expect_error "eval --steps past the data" "eval --steps 300: $FIX/tokens.bin holds 255 batch windows" \
  eval --model $model --data $FIX/tokens.bin --batch 2 --seq-len 16 --steps 300 --backend cpu

# A save that succeeds leaves only final names (no *.tmp).
"$MT" train --model $model "${base[@]}" --save "$D/good" > /dev/null 2>&1
check "good save exits 0" test $? -eq 0
check "good save leaves no temporary files" test -z "$(find "$D/good" -name '*.tmp')"
check "good save has all four files" test -f "$D/good/config.json" -a -f "$D/good/model.safetensors" -a -f "$D/good/optimizer.safetensors" -a -f "$D/good/train_state.json"
contra "--init with --resume" "--init random: the weights come from the --resume checkpoint" train --resume "$D/good" --init random --steps 2
contra "--allow-unused-tensors with --resume" "a --resume checkpoint must hold exactly what it recorded" train --resume "$D/good" --steps 2 --allow-unused-tensors
finish
