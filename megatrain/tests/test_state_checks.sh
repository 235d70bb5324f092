#!/usr/bin/env bash
# State is checked like input, and never saved non-finite: non-finite state from
# options and from input files, tampered, mixed and partial checkpoints, a
# tampered train_state.json, float options that do not survive narrowing to
# f32, sizes that overflow, outputs onto inputs, and the smaller cases of issue
# 10. Each gives the exit status asked for and a last stderr line naming the
# file, field, tensor or option; nothing previously saved changes.
source "$(dirname "$0")/lib.sh"

# poke FILE TENSOR INDEX VALUE: overwrites one element of a safetensors tensor.
poke() {
  python3 - "$@" <<'EOF'
import json, struct, sys
path, name, idx, val = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]; t = json.loads(f.read(n))[name]
    size = 4 if t["dtype"] == "F32" else 2
    f.seek(8 + n + t["data_offsets"][0] + idx * size)
    b = struct.pack("<f", val)
    f.write(b if size == 4 else b[2:])
EOF
}
unchanged() { # unchanged A B: every checkpoint file of A is byte-identical in B
  for f in checkpoint.json config.json model.safetensors optimizer.safetensors train_state.json; do
    cmp -s "$1/$f" "$2/$f" || return 1
  done
}

data=(--data $FIX/tokens.bin --batch 2 --seq-len 16 --backend cpu)
run=(--model $FIX/tiny_llama "${data[@]}" --lr 2e-3)
ck=$TMP/ck
"$MT" train "${run[@]}" --steps 2 --save "$ck" > /dev/null 2>&1
check "a good checkpoint at step 2" test "$(jq .step "$ck/checkpoint.json")" = 2
cp -r "$ck" "$TMP/ck_before"
copy() { rm -rf "$TMP/$1"; cp -r "$ck" "$TMP/$1"; echo "$TMP/$1"; }

# --- 2. non-finite state from options: lr x weight_decay overflows f32, the decay
# turns the weights infinite; never saved, the last good checkpoint stays.
expect 1 "step 3: not saved: tensor model.embed_tokens.weight (weights): -inf at element 0 is not finite; $ck keeps step 2" \
  train --resume "$ck" --steps 3 --lr 1e30 --weight-decay 1e30 --save "$ck"
check "the last good checkpoint is byte-identical" unchanged "$TMP/ck_before" "$ck"
# Without a save (a --resume saves back to its DIR): the run's result is checked all the same.
expect 1 "after step 1: the trained state is not finite" train --model $FIX/tiny_llama "${data[@]}" --steps 1 --lr 1e30 --weight-decay 1e30
# A diverging run: the save of step 3 is finite (weights ~1e30) but step 4's loss
# is not, so that save is never committed.
expect 1 "step 4: loss is nan; try a lower --lr; $ck keeps step 2" \
  train --resume "$ck" --steps 6 --lr 1e30 --save-every 1 --save "$ck"
check "a diverging run leaves the last good checkpoint" unchanged "$TMP/ck_before" "$ck"
check "and no staged save" test -z "$(find "$TMP" -maxdepth 1 -name '.ck.tmp-*')"

# --- 4. float options are checked as the f32 the engine uses.
expect 2 "--beta2: must be in [0, 1), got 0.9999999999 (it rounds to 1 in single precision)" train "${run[@]}" --beta2 0.9999999999
expect 2 "--lr: 1e39 overflows single precision" train "${run[@]}" --lr 1e39
expect 2 "--weight-decay: 1e39 overflows single precision" train "${run[@]}" --weight-decay 1e39
expect 2 "--eps: 1e-50 rounds to 0 in single precision" train "${run[@]}" --eps 1e-50
expect 2 "--lr: expected a finite number, got 'nan'" train "${run[@]}" --lr nan
expect 2 "--grad-clip: expected a finite number, got 'inf'" train "${run[@]}" --grad-clip inf

# --- 2. NaN in input files, also where the data never reads (a row of the
# embedding no token uses), names the file and the tensor.
hf=$TMP/hf; cp -r $FIX/tiny_llama "$hf"
poke "$hf/model.safetensors" model.embed_tokens.weight 16000 nan
expect 1 "$hf/model.safetensors: tensor model.embed_tokens.weight: nan at element 16000 is not finite" train --model "$hf" "${data[@]}" --steps 1
expect 1 "$hf/model.safetensors: tensor model.embed_tokens.weight: nan at element 16000 is not finite" eval --model "$hf" "${data[@]}"
hf2=$TMP/hf2; cp -r $FIX/tiny_llama "$hf2"
poke "$hf2/model.safetensors" model.norm.weight 5 3.4e38 # finite in f32, infinite in bf16
expect 1 "tensor model.norm.weight (rounded to bf16): inf at element 5" train --model "$hf2" "${data[@]}" --steps 1 --precision paper
expect 1 "tensor model.norm.weight (rounded to bf16): inf at element 5" train --model "$hf2" "${data[@]}" --steps 1 --precision mixed
# Finite weights that overflow in the forward pass: eval exits 1, not {"loss": null}.
hf3=$TMP/hf3; cp -r $FIX/tiny_llama "$hf3"
for i in 0 1 2 3; do poke "$hf3/model.safetensors" model.norm.weight $i 3e38; done
expect 1 "eval: the loss of $hf3 on $FIX/tokens.bin is nan: its weights overflow in the forward pass" eval --model "$hf3" "${data[@]}"
check "eval printed no loss" test ! -s "$TMP/out"
d=$(copy nan_opt); poke "$d/optimizer.safetensors" model.norm.weight.exp_avg 3 inf; resign "$d" optimizer.safetensors
expect 1 "$d/optimizer.safetensors: tensor model.norm.weight.exp_avg: inf at element 3 is not finite" train --resume "$d" --steps 3
d=$(copy neg_v); poke "$d/optimizer.safetensors" model.norm.weight.exp_avg_sq 3 -1; resign "$d" optimizer.safetensors
expect 1 "tensor model.norm.weight.exp_avg_sq: -1 at element 3: exp_avg_sq cannot be negative" train --resume "$d" --steps 3

# --- 1. mixed, partial, damaged and foreign checkpoints are refused naming the file.
d=$(copy damaged); poke "$d/model.safetensors" model.layers.1.mlp.up_proj.weight 7 0.5
expect 1 "$d/model.safetensors: tensor model.layers.1.mlp.up_proj.weight: CRC-32" train --resume "$d" --steps 3
expect 1 "$d/model.safetensors: tensor model.layers.1.mlp.up_proj.weight: CRC-32" eval --model "$d" "${data[@]}"
"$MT" train "${run[@]}" --steps 3 --save "$TMP/ck3" > /dev/null 2>&1
d=$(copy mixed); cp "$TMP/ck3/model.safetensors" "$d/"
expect 1 "$d/model.safetensors: tensor" train --resume "$d" --steps 4
d=$(copy mixed_state); cp "$TMP/ck3/train_state.json" "$d/"
expect 1 "$d/train_state.json: " train --resume "$d" --steps 4
d=$(copy partial); rm "$d/optimizer.safetensors"
expect 1 "$d/optimizer.safetensors: missing (checkpoint.json lists it): a partial checkpoint" train --resume "$d" --steps 3
d=$(copy nomanifest); rm "$d/checkpoint.json"
expect 1 "$d: no checkpoint.json: not a complete megatrain checkpoint" train --resume "$d" --steps 3
d=$(copy foreign); "$MT" train --model $FIX/tiny_qwen2 "${data[@]}" --steps 1 --save "$TMP/qwen" > /dev/null 2>&1
cp "$TMP/qwen/checkpoint.json" "$d/"
expect 1 "$d/config.json: " train --resume "$d" --steps 3

# --- 3. train_state.json is checked like the command line: edited, it fails its
# CRC; edited and re-signed, every field is validated as its option would be.
d=$(copy ts_edit); jq '.hparams.lr = 1' "$ck/train_state.json" > "$d/train_state.json"
expect 1 "$d/train_state.json: " train --resume "$d" --steps 3
tamper() { # tamper JQ NEEDLE
  d=$(copy tamper); jq "$1" "$ck/train_state.json" > "$d/train_state.json"; resign "$d" train_state.json
  expect 1 "$d/train_state.json: $2" train --resume "$d" --steps 3
}
tamper '.step = 1e10' "step: expected a whole number in [0, 2147483647], got 10000000000"
tamper '.step = 1.5' "step: expected a whole number"
tamper '.hparams.lr = -5' "hparams.lr: must be >= 0, got -5"
tamper '.hparams.beta2 = 7' "hparams.beta2: must be in [0, 1), got 7"
tamper '.hparams.beta2 = 0.9999999999' "hparams.beta2: must be in [0, 1), got 0.9999999999 (it rounds to 1"
tamper '.hparams.eps = 1e-50' "hparams.eps: 1e-50 rounds to 0 in single precision"
tamper '.hparams.weight_decay = 1e39' "hparams.weight_decay: 1e+39 overflows single precision"
tamper '.batch = 2.5' "batch: expected a positive integer"
tamper '.batch = 1e12' "batch: expected a positive integer (at most 2147483647), got '1000000000000'"
tamper '.seed = "abc"' "seed: expected a non-negative integer, got 'abc'"
tamper '.seed = [1]' "seed: expected a number or a string"
tamper '.seed = "-1"' "seed: expected a non-negative integer, got '-1'"
tamper '.precision = "fp8"' "precision: unknown value 'fp8'"
tamper '.data_cursor = 1e6' "data_cursor 1000000 is beyond the end of $(realpath $FIX/tokens.bin)" # train_state.json records it absolute
tamper 'del(.hparams.warmup)' "hparams.warmup: missing field"
tamper '.total_steps = 1' "step 2 is beyond total_steps 1"
# Duplicated keys are refused in every JSON file megatrain reads, naming the key.
d=$(copy dup); sed -i 's/"step":/"step": 1, "step":/' "$d/train_state.json"; resign "$d" train_state.json
expect 1 "$d/train_state.json: key 'step' appears twice" train --resume "$d" --steps 3
mkdir -p "$TMP/dupcfg"; cp $FIX/tiny_llama/model.safetensors "$TMP/dupcfg/"
sed 's/"hidden_size": 64,/"hidden_size": 64, "hidden_size": 32,/' $FIX/tiny_llama/config.json > "$TMP/dupcfg/config.json"
expect 1 "$TMP/dupcfg/config.json: key 'hidden_size' appears twice" train --model "$TMP/dupcfg" "${data[@]}" --steps 1

# --- 6. size arithmetic: overflow names the config fields, before any allocation.
big=$TMP/big.json
jq '.hidden_size = 2147483646 | .intermediate_size = 2147483646 | .head_dim = 64 | del(.rope_scaling)' \
  $FIX/tiny_llama/config.json > "$big"
expect 1 "intermediate_size x hidden_size" plan --config "$big" --batch 1 --seq-len 16 --precision paper
expect 1 "intermediate_size x hidden_size" train --config "$big" --data synthetic --batch 1 --seq-len 16 --backend cpu
jq '.hidden_size = 65536 | .intermediate_size = 65536 | .num_hidden_layers = 2147483647 | del(.rope_scaling)' \
  $FIX/tiny_llama/config.json > "$big"
expect 1 "num_hidden_layers x the layer's parameters" plan --config "$big" --batch 1 --seq-len 16 --precision paper
jq '.hidden_size = 65536 | .intermediate_size = 65536 | .num_hidden_layers = 20000000 | del(.rope_scaling)' \
  $FIX/tiny_llama/config.json > "$big"
expect 1 "beyond the 2^58 whose byte counts fit 64 bits" plan --config "$big" --batch 1 --seq-len 16 --precision paper
expect 2 "--batch x --seq-len: 4611686014132420609 tokens per micro-batch is too many" \
  train --model $FIX/tiny_llama --data $FIX/tokens.bin --backend cpu --batch 2147483647 --seq-len 2147483647
# Hardware profile figures are range-checked (a unit mix-up, or a figure that
# would make a prediction 0, inf or NaN).
hw() { jq "$1" experiments/hardware/h100-128g.json > "$TMP/hw.json"
       expect 1 "$TMP/hw.json: $2" plan --model $FIX/tiny_llama --batch 1 --seq-len 16 --precision paper --hardware "$TMP/hw.json"; }
hw '.host.mem_bytes = 1e308' "host.mem_bytes: 1e+308 is outside the plausible range"
hw '.host.cpu_cores = 1e30' "host.cpu_cores: 1e+30 is outside the plausible range"
hw '.host.cpu_cores = 2.5' "host.cpu_cores: expected a whole number"
hw '.gpu.peak_tflops.bf16 = 1e-300' "gpu.peak_tflops.bf16: 1e-300 is outside the plausible range"
hw '.link.h2d_gbps.pinned = 55e9' "link.h2d_gbps.pinned: 5.5e+10 is outside the plausible range"

# --- 7. outputs never overwrite inputs (compared as files: links and other
# spellings of a path included); every output is checked before training.
cp $FIX/tokens.bin "$TMP/tokens.bin"
expect 1 "--log $TMP/tokens.bin: is the --data file $TMP/tokens.bin" train --model $FIX/tiny_llama --data "$TMP/tokens.bin" --batch 2 --seq-len 16 --backend cpu --log "$TMP/tokens.bin"
check "the data file is untouched" cmp -s $FIX/tokens.bin "$TMP/tokens.bin"
ln -s "$TMP/tokens.bin" "$TMP/alias.bin"
expect 1 "is the --data file" train --model $FIX/tiny_llama --data "$TMP/tokens.bin" --batch 2 --seq-len 16 --backend cpu --log "$TMP/alias.bin"
expect 1 "is the --data file" eval --model $FIX/tiny_llama --data "$TMP/tokens.bin" --batch 2 --seq-len 16 --log "$TMP/./tokens.bin"
cp -r $FIX/tiny_llama "$TMP/m"
expect 1 "--dump-grads $TMP/m/model.safetensors: is the --model file" train --model "$TMP/m" "${data[@]}" --steps 1 --dump-grads "$TMP/m/model.safetensors"
check "the model file is untouched" cmp -s $FIX/tiny_llama/model.safetensors "$TMP/m/model.safetensors"
expect 1 "--save $TMP/m/: is the --model directory" train --model "$TMP/m" "${data[@]}" --steps 1 --save "$TMP/m/"
mkdir -p "$TMP/cfgdir"; cp $FIX/tiny_llama/config.json "$TMP/cfgdir/"
expect 1 "--save $TMP/cfgdir: would overwrite the --config file" train --config "$TMP/cfgdir/config.json" "${data[@]}" --steps 1 --save "$TMP/cfgdir"
expect 1 "--trace $TMP/same.json: --log writes the same file" train "${run[@]}" --steps 1 --log "$TMP/same.json" --trace "$TMP/same.json"
expect 1 "--log $ck/train_state.json: is the --resume file" train --resume "$ck" --steps 3 --log "$ck/train_state.json"
expect 1 "a save into $TMP/new writes this file" train "${run[@]}" --steps 1 --save "$TMP/new" --log "$TMP/new/checkpoint.json"
expect 1 "--trace $TMP/nodir/t.json: the directory $TMP/nodir does not exist" train "${run[@]}" --steps 1 --trace "$TMP/nodir/t.json"
check "a bad --trace fails before training (no step on stdout)" test ! -s "$TMP/out"
expect 1 "--save $TMP/hf: exists and is not a megatrain checkpoint" train "${run[@]}" --steps 1 --save "$TMP/hf"
# Resuming in place is the one overwrite allowed; a log inside the checkpoint
# directory survives the switch (carried over), and so does any other plain file.
echo keep > "$ck/NOTES.txt"
"$MT" train --resume "$ck" --steps 3 --save "$ck" --log "$ck/log.jsonl" > /dev/null 2>&1
check "resume in place with a log inside the checkpoint" test "$(jq .step "$ck/checkpoint.json")" = 3
check "the log inside the checkpoint is kept" test "$(jq -s length "$ck/log.jsonl")" = 1
check "a user's file inside the checkpoint is kept" test "$(cat "$ck/NOTES.txt")" = keep

# --- 8. the smaller items.
# A resume that trains zero steps does not claim a save it did not make...
expect 0 "nothing to train: $ck is already at step 3 (--steps 3)" train --resume "$ck" --steps 3
# ...and with --save elsewhere it saves the loaded state there.
expect 0 "saved it to $TMP/copy3" train --resume "$ck" --steps 3 --save "$TMP/copy3"
check "the zero-step save holds the same weights" cmp -s "$ck/model.safetensors" "$TMP/copy3/model.safetensors"
expect 2 "eval --backend sim: the sim backend times operations without data" eval --model $FIX/tiny_llama "${data[@]/cpu/sim}"
expect 2 "--hardware h100-128g: only --backend sim uses a hardware profile" train "${run[@]}" --hardware h100-128g
expect 2 "eval: --model DIR is required" eval "${data[@]}"
expect 2 "train: missing --model DIR, --config FILE or --resume DIR" train "${data[@]}"
"$MT" train --help > "$TMP/out" 2> "$TMP/err"
check "train --help exits 0" test $? -eq 0
check "train --help prints the usage" grep -q "usage: megatrain" "$TMP/err"
"$MT" eval --model x --help > /dev/null 2>&1
check "eval --help exits 0" test $? -eq 0
finish
