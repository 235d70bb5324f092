#!/usr/bin/env bash
# The layouts HF checkpoints come in: sharded saves (model-0000i-of-0000N.safetensors
# with model.safetensors.index.json, the optimizer state alike) read back by --resume
# and --model and resumed bit-exactly; tampered or partial shard sets refused naming
# the file; a save's shards replacing the previous save's; --shard-size parsed as
# transformers parses max_shard_size; F16 models trained (the weights widened exactly);
# and the source config.json written back with only the dtype changed.
source "$(dirname "$0")/lib.sh"

losses() { jq -c '[.step, .loss]' "$1" | tr '\n' ' '; }

data=(--data $FIX/tokens.bin --batch 2 --seq-len 16 --backend cpu)
run=(--model $FIX/tiny_llama "${data[@]}" --lr 2e-3)
shard=(--shard-size 200kB) # tiny_llama: 0.41 MB of f32 weights -> 3 shards; moments -> 5

# --- a sharded save: HF's names and index --------------------------------------------
"$MT" train "${run[@]}" --steps 4 --save "$TMP/one" --log "$TMP/one.jsonl" > /dev/null 2>&1
check "unsharded reference run" test $? -eq 0
"$MT" train "${run[@]}" --steps 4 "${shard[@]}" --save "$TMP/sh" --log "$TMP/sh.jsonl" > /dev/null 2> "$TMP/err"
check "sharded run ($(tail -n 1 "$TMP/err"))" test $? -eq 0
names=$(cd "$TMP/sh" && ls | tr '\n' ' ')
want="checkpoint.json config.json model-00001-of-00003.safetensors model-00002-of-00003.safetensors \
model-00003-of-00003.safetensors model.safetensors.index.json optimizer-00001-of-00005.safetensors \
optimizer-00002-of-00005.safetensors optimizer-00003-of-00005.safetensors optimizer-00004-of-00005.safetensors \
optimizer-00005-of-00005.safetensors optimizer.safetensors.index.json train_state.json "
check "HF shard names ($names)" test "$names" = "$want"
check "the unsharded save is one file each" test -f "$TMP/one/model.safetensors" -a -f "$TMP/one/optimizer.safetensors" \
  -a ! -e "$TMP/one/model.safetensors.index.json"
check "the shard size does not change the trajectory" test "$(losses "$TMP/one.jsonl")" = "$(losses "$TMP/sh.jsonl")"
# The index: every tensor mapped to the shard that holds it; total_size = the shards' tensor bytes.
python3 - "$TMP/sh" model optimizer > "$TMP/idx" 2>&1 <<'EOF'
import json, os, struct, sys
d = sys.argv[1]
for stem in sys.argv[2:]:
    idx = json.load(open(f"{d}/{stem}.safetensors.index.json"))
    held, data = {}, 0
    for f in sorted(set(idx["weight_map"].values())):
        b = open(f"{d}/{f}", "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
        data += len(b) - 8 - n
        for k, t in h.items():
            held[k] = f
            assert t["data_offsets"][1] <= 200000 or len(h) == 1, f"{f}: shard over 200kB of data"
    assert held == idx["weight_map"], f"{stem}: weight_map differs from the shards' contents"
    assert idx["metadata"]["total_size"] == data, f"{stem}: total_size {idx['metadata']['total_size']} != {data}"
print("ok")
EOF
check "indexes map every tensor to its shard, total_size exact ($(tail -n 1 "$TMP/idx"))" test "$(tail -n 1 "$TMP/idx")" = ok
check "the tied model has no lm_head.weight" test "$(jq '.weight_map | has("lm_head.weight")' "$TMP/sh/model.safetensors.index.json")" = false
check "the manifest records every shard and index" test "$(jq -r '.files | keys | join(" ")' "$TMP/sh/checkpoint.json")" = \
  "config.json model-00001-of-00003.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors model.safetensors.index.json optimizer-00001-of-00005.safetensors optimizer-00002-of-00005.safetensors optimizer-00003-of-00005.safetensors optimizer-00004-of-00005.safetensors optimizer-00005-of-00005.safetensors optimizer.safetensors.index.json train_state.json"

# --- both layouts read: --model (eval and train) and --resume, bit-exactly --------------
"$MT" eval --model "$TMP/one" "${data[@]}" > "$TMP/e1" 2> /dev/null
"$MT" eval --model "$TMP/sh" "${data[@]}" > "$TMP/e2" 2> /dev/null
check "eval reads the sharded save: the same loss ($(jq -c .loss "$TMP/e2" 2>/dev/null))" test -s "$TMP/e1" -a "$(jq .loss "$TMP/e1")" = "$(jq .loss "$TMP/e2")"
"$MT" train "${run[@]}" --steps 2 "${shard[@]}" --save "$TMP/half" > /dev/null 2>&1
"$MT" train --resume "$TMP/half" --steps 4 "${shard[@]}" --save "$TMP/res" --log "$TMP/res.jsonl" > /dev/null 2> "$TMP/err"
check "resume from a sharded save ($(tail -n 1 "$TMP/err"))" test $? -eq 0
same=1
for f in "$TMP"/sh/*.safetensors "$TMP"/sh/*.index.json "$TMP/sh/config.json"; do
  cmp -s "$f" "$TMP/res/$(basename "$f")" || { same=0; echo "differs: $(basename "$f")" >&2; }
done
check "the resumed sharded save equals the uninterrupted one, file by file" test $same -eq 1
check "resumed losses on the uninterrupted trajectory" test "$(jq -c 'select(.step > 2) | [.step, .loss]' "$TMP/sh.jsonl" | tr '\n' ' ')" = "$(losses "$TMP/res.jsonl")"
"$MT" train --resume "$TMP/half" --steps 4 --save "$TMP/res1" > /dev/null 2>&1
check "sharded -> unsharded resume: bitwise the unsharded run" cmp -s "$TMP/one/model.safetensors" "$TMP/res1/model.safetensors"
check "  and its moments" cmp -s "$TMP/one/optimizer.safetensors" "$TMP/res1/optimizer.safetensors"
"$MT" train "${run[@]}" --steps 2 --save "$TMP/half1" > /dev/null 2>&1
"$MT" train --resume "$TMP/half1" --steps 4 "${shard[@]}" --save "$TMP/res2" > /dev/null 2>&1
check "unsharded -> sharded resume: bitwise the sharded run" cmp -s "$TMP/sh/model-00002-of-00003.safetensors" "$TMP/res2/model-00002-of-00003.safetensors"
"$MT" train --model "$TMP/sh" "${data[@]}" --steps 1 > /dev/null 2> "$TMP/err"
check "train --model on a sharded save ($(tail -n 1 "$TMP/err"))" test $? -eq 0

# --- a save replaces the previous save's files, whatever its layout ---------------------
cp -r "$TMP/one" "$TMP/swap" && echo '{}' > "$TMP/swap/tokenizer.json"
"$MT" train --resume "$TMP/swap" --steps 5 "${shard[@]}" --save "$TMP/swap" > /dev/null 2>&1
check "unsharded -> sharded in place: no stale model.safetensors, the tokenizer carried" \
  test ! -e "$TMP/swap/model.safetensors" -a ! -e "$TMP/swap/optimizer.safetensors" -a -f "$TMP/swap/tokenizer.json" \
  -a -f "$TMP/swap/model-00003-of-00003.safetensors"
"$MT" train --resume "$TMP/swap" --steps 6 --save "$TMP/swap" > /dev/null 2>&1
check "sharded -> unsharded in place: no stale shard or index" \
  test "$(cd "$TMP/swap" && ls | tr '\n' ' ')" = "checkpoint.json config.json model.safetensors optimizer.safetensors tokenizer.json train_state.json "

# --- partial, mixed and edited shard sets are refused, naming the file --------------------
copy() { rm -rf "$TMP/$1"; cp -r "$TMP/sh" "$TMP/$1"; echo "$TMP/$1"; }
d=$(copy gone); rm "$d/model-00002-of-00003.safetensors"
expect 1 "$d/model-00002-of-00003.safetensors: missing (checkpoint.json lists it)" train --resume "$d" --steps 5
d=$(copy idx); sed -i 's/model-00001-of-00003/model-00002-of-00003/' "$d/model.safetensors.index.json"
expect 1 "$d/model.safetensors.index.json: " train --resume "$d" --steps 5
d=$(copy stray); cp "$TMP/one/model.safetensors" "$d/"
expect 1 "checkpoint.json records it in model-0000" eval --model "$d" "${data[@]}"
d=$(copy noidx); rm "$d/optimizer.safetensors.index.json"
jq 'del(.files["optimizer.safetensors.index.json"])' "$d/checkpoint.json" > "$d/m" && mv "$d/m" "$d/checkpoint.json"
expect 1 "the optimizer state is neither one optimizer.safetensors nor shards 1..N" train --resume "$d" --steps 5
# A plain HF directory (no checkpoint.json) with a missing shard: the index names it.
mkdir -p "$TMP/hf" && cp "$TMP/sh"/model* "$TMP/sh/config.json" "$TMP/hf/" && rm "$TMP/hf/model-00003-of-00003.safetensors"
expect 1 "$TMP/hf/model-00003-of-00003.safetensors, which cannot be opened" eval --model "$TMP/hf" "${data[@]}"

# --- --shard-size: transformers' units; bad values exit 2 naming the option -------------
for v in 0 -1 5XB 1.5 0.5B nan "5 GB" GB 0.1MiB; do
  expect 2 "--shard-size" train "${run[@]}" --steps 1 --shard-size "$v"
done
"$MT" train "${run[@]}" --steps 1 --shard-size 1KiB --save "$TMP/kib" > /dev/null 2>&1
check "--shard-size 1KiB: every tensor a shard of its own" test -f "$TMP/kib/model-00020-of-00020.safetensors"
"$MT" train "${run[@]}" --steps 1 --shard-size 1GB --save "$TMP/gb" > /dev/null 2>&1
check "--shard-size 1GB: one file" test -f "$TMP/gb/model.safetensors" -a ! -e "$TMP/gb/model.safetensors.index.json"

# --- F16 models: read, widened exactly, trained --------------------------------------------
# f16/: the fixture's weights as F16; f16x/: the same values (rounded through F16) as F32.
python3 - "$FIX/tiny_llama" "$TMP" <<'EOF'
import json, shutil, struct, sys, os
src, out = sys.argv[1], sys.argv[2]
b = open(f"{src}/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
def write(path, dtype, fmt, size):
    hdr, blobs, off = {}, [], 0
    for k in sorted(h):
        a, e = h[k]["data_offsets"]
        vals = struct.unpack(f"<{(e - a) // 4}f", b[8 + n + a:8 + n + e])
        vals = struct.unpack(f"<{len(vals)}e", struct.pack(f"<{len(vals)}e", *vals))  # through F16
        blob = struct.pack(f"<{len(vals)}{fmt}", *vals)
        hdr[k] = {"dtype": dtype, "shape": h[k]["shape"], "data_offsets": [off, off + len(blob)]}
        blobs.append(blob); off += len(blob)
    hj = json.dumps(hdr).encode(); hj += b" " * (-len(hj) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
for d, dtype, fmt in (("f16", "F16", "e"), ("f16x", "F32", "f")):
    os.makedirs(f"{out}/{d}", exist_ok=True)
    c = json.load(open(f"{src}/config.json")); c["torch_dtype"] = "float16" if dtype == "F16" else "float32"
    json.dump(c, open(f"{out}/{d}/config.json", "w"), indent=2)
    write(f"{out}/{d}/model.safetensors", dtype, fmt, 2 if dtype == "F16" else 4)
EOF
f16run=("${data[@]}" --lr 2e-3 --steps 3 --precision fp32)
"$MT" train --model "$TMP/f16" "${f16run[@]}" --save "$TMP/f16o" --log "$TMP/f16.jsonl" > /dev/null 2> "$TMP/err"
check "an F16 model trains ($(tail -n 1 "$TMP/err"))" test $? -eq 0
"$MT" train --model "$TMP/f16x" "${f16run[@]}" --save "$TMP/f16xo" --log "$TMP/f16x.jsonl" > /dev/null 2>&1
check "F16 read = its values in F32: the same losses" test -s "$TMP/f16.jsonl" -a "$(losses "$TMP/f16.jsonl")" = "$(losses "$TMP/f16x.jsonl")"
check "  and bitwise the same weights after 3 steps" cmp -s "$TMP/f16o/model.safetensors" "$TMP/f16xo/model.safetensors"
check "an fp32 save of an F16 model says float32" test "$(jq -r .torch_dtype "$TMP/f16o/config.json")" = float32
for p in paper mixed; do
  "$MT" train --model "$TMP/f16" "${data[@]}" --lr 2e-3 --steps 2 --precision $p --save "$TMP/f16$p" > "$TMP/o" 2> "$TMP/err"
  check "F16 model, $p precision ($(tail -n 1 "$TMP/err"))" test $? -eq 0 -a "$(jq -s 'map(.loss) | all(. > 0 and . < 10)' "$TMP/o")" = true
done
check "a paper save of an F16 model says bfloat16" test "$(jq -r .torch_dtype "$TMP/f16paper/config.json")" = bfloat16
# An infinity in F16 (an overflow past 65504 when the model was cast to half): file, tensor, F16 named.
python3 - "$TMP/f16/model.safetensors" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]; t = json.loads(f.read(n))["model.norm.weight"]
    f.seek(8 + n + t["data_offsets"][0] + 2 * 3); f.write(struct.pack("<H", 0x7c00))
EOF
expect 1 "$TMP/f16/model.safetensors: tensor model.norm.weight (stored as F16" train --model "$TMP/f16" "${f16run[@]}"
check "  names the element and the value" grep -q "inf at element 3 is not finite" "$TMP/err"

# --- config.json: written back with only the dtype changed ----------------------------
mkdir -p "$TMP/cfg" && cp $FIX/tiny_llama/model.safetensors "$TMP/cfg/"
python3 - $FIX/tiny_llama/config.json "$TMP/cfg/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(eos_token_id=[2, 7, 9], custom_field={"keep": [1, 2.5, "x"]}, rope_theta=10000.0)
json.dump(c, open(sys.argv[2], "w"), indent=2)
EOF
"$MT" train --model "$TMP/cfg" "${data[@]}" --steps 1 --precision paper "${shard[@]}" --save "$TMP/cfgo" > /dev/null 2>&1
check "eos_token_id list kept" test "$(jq -c .eos_token_id "$TMP/cfgo/config.json")" = "[2,7,9]"
check "unread fields kept" test "$(jq -c .custom_field "$TMP/cfgo/config.json")" = '{"keep":[1,2.5,"x"]}'
check "numbers kept as written (10000.0 stays a float)" grep -q '"rope_theta": 10000.0' "$TMP/cfgo/config.json"
check "only torch_dtype changed" test "$(jq -S 'del(.torch_dtype)' "$TMP/cfg/config.json")" = "$(jq -S 'del(.torch_dtype)' "$TMP/cfgo/config.json")"
check "torch_dtype says what was saved" test "$(jq -r .torch_dtype "$TMP/cfgo/config.json")" = bfloat16
finish
