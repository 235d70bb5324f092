#!/usr/bin/env bash
# A resume reads the tokens the run read, or is refused naming the path the
# checkpoint recorded (issue 29, class 4). train_state.json records the data file's
# absolute path, its length in tokens and its CRC-32: a resume started elsewhere,
# where the same relative path holds other tokens, used to exit 0 on another
# trajectory. Also: data edited in place, a missing file, synthetic vs a file, a
# copy of the same tokens elsewhere (accepted), and an older (version 2) state,
# which recorded only the path as typed: refused unless --data names the file.
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { echo "skipped: no jq"; exit 77; }

MT=$(realpath "$MT"); MODEL=$(realpath $FIX/tiny_llama); TOK=$(realpath $FIX/tokens.bin)
opts=(--model "$MODEL" --data tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
A=$TMP/a B=$TMP/b ck=$TMP/ck; mkdir -p "$A" "$B"
cp "$TOK" "$A/tokens.bin"
# B's tokens.bin: the same length, other tokens (each id + 1, mod the vocabulary's 256).
python3 -c "import sys,struct; b=open(sys.argv[1],'rb').read(); n=len(b)//4; t=struct.unpack('<%dI'%n,b); open(sys.argv[2],'wb').write(struct.pack('<%dI'%n,*[(x+1)%256 for x in t]))" "$A/tokens.bin" "$B/tokens.bin"

(cd "$A" && "$MT" train "${opts[@]}" --steps 2 --save "$ck" > /dev/null 2>&1)
check "a checkpoint at step 2, trained on a relative --data" test "$(jq .step "$ck/train_state.json")" = 2
cp -r "$ck" "$TMP/ck_at2" # a --resume saves back to its DIR: each resume that trains starts from this copy
fresh_ck() { rm -rf "$ck"; cp -r "$TMP/ck_at2" "$ck"; }
(cd "$A" && "$MT" train "${opts[@]}" --steps 3 > "$TMP/full.jsonl" 2>/dev/null)
check "train_state.json records the absolute path" test "$(jq -r .data "$ck/train_state.json")" = "$A/tokens.bin"
check "... the length in tokens" test "$(jq .data_tokens "$ck/train_state.json")" = $(( $(stat -c %s "$TOK") / 4 ))
crc=$(python3 -c "import sys,zlib; print('%08x' % zlib.crc32(open(sys.argv[1],'rb').read()))" "$TOK")
check "... and the file's CRC-32 ($crc)" test "$(jq -r .data_crc32 "$ck/train_state.json")" = "$crc"

cd "$B" || exit 1
# The same relative path in another directory holds other tokens: refused, naming what was recorded.
expect 1 "$ck/train_state.json: the data changed: the checkpoint was trained on $A/tokens.bin (8192 tokens, CRC-32 $crc), but --data $B/tokens.bin holds 8192 tokens" \
  train --resume "$ck" --steps 3 --data tokens.bin
# Without --data the recorded absolute path is read, from anywhere, on the run's own trajectory.
expect 0 "" train --resume "$ck" --steps 3
check "resumed from another directory: step 3's loss is the uninterrupted run's" \
  test "$(jq -c '[.step, .loss]' "$TMP/out")" = "$(jq -c '[.step, .loss]' "$TMP/full.jsonl" | tail -n 1)"
# A copy of the same tokens under another name is the same data.
cp "$TOK" "$B/copy.bin"
fresh_ck
expect 0 "" train --resume "$ck" --steps 3 --data copy.bin
check "... and trains step 3" test "$(jq -c .step "$TMP/out")" = 3
fresh_ck # (that resume saved step 3 back, recording copy.bin)
# The recorded file edited in place (same size, one token changed): refused.
cp "$A/tokens.bin" "$TMP/keep.bin"
printf '\x07\x00\x00\x00' | dd of="$A/tokens.bin" bs=4 seek=100 conv=notrunc status=none
expect 1 "the data changed: the checkpoint was trained on $A/tokens.bin (8192 tokens, CRC-32 $crc), but $A/tokens.bin holds 8192 tokens, CRC-32" \
  train --resume "$ck" --steps 3
# The recorded file gone: the message says the path came from the checkpoint.
rm "$A/tokens.bin"
expect 1 "$ck/train_state.json records the data $A/tokens.bin: $A/tokens.bin: cannot open" train --resume "$ck" --steps 3
cp "$TMP/keep.bin" "$A/tokens.bin"
# Synthetic data and a file are not interchangeable either way.
expect 1 "the checkpoint was trained on $A/tokens.bin, but this run reads synthetic" train --resume "$ck" --steps 3 --data synthetic
"$MT" train --model "$MODEL" --data synthetic --batch 2 --seq-len 16 --steps 1 --backend cpu --save "$TMP/syn" > /dev/null 2>&1
expect 1 "the checkpoint was trained on synthetic, but this run reads $B/copy.bin" train --resume "$TMP/syn" --steps 2 --data copy.bin
expect 1 "--seed 9: the checkpoint's synthetic data came from seed 0" train --resume "$TMP/syn" --steps 2 --seed 9
expect 0 "" train --resume "$TMP/syn" --steps 2
# A damaged identity is refused like any field.
old=$TMP/damaged; cp -r "$ck" "$old"
jq '.data_crc32 = "xyz"' "$ck/train_state.json" > "$old/train_state.json"; resign "$old" train_state.json
expect 1 "$old/train_state.json: data_crc32: expected 8 lowercase hex digits" train --resume "$old" --steps 3

# --- a version 2 state (before the data was identified): the path as typed, relative.
fresh_ck
old=$TMP/v2; cp -r "$ck" "$old"
jq '.version = 2 | .data = "tokens.bin" | del(.data_tokens, .data_crc32)' "$ck/train_state.json" > "$old/train_state.json"
resign "$old" train_state.json
expect 1 "$old/train_state.json: version 2 records the data only as typed (tokens.bin), with no size or checksum" \
  train --resume "$old" --steps 3
check "the refusal says how to go on" grep -qF "HINT: give --data FILE" "$TMP/err"
expect 0 "" train --resume "$old" --steps 3 --data "$A/tokens.bin"
check "... then a note says it cannot be checked" grep -qF "cannot identify its data; reading --data $A/tokens.bin" "$TMP/err"
check "... on the run's own trajectory" \
  test "$(jq -c '[.step, .loss]' "$TMP/out")" = "$(jq -c '[.step, .loss]' "$TMP/full.jsonl" | tail -n 1)"
# A version 2 state on synthetic data resumes as before (the seed regenerates it).
old=$TMP/v2syn; cp -r "$TMP/syn" "$old"
jq '.version = 2' "$TMP/syn/train_state.json" > "$old/train_state.json"; resign "$old" train_state.json
expect 0 "" train --resume "$old" --steps 2
cd - > /dev/null
finish
