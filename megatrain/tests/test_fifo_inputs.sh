#!/usr/bin/env bash
# Every file megatrain reads is refused, naming it, when it is not a regular file:
# a FIFO left in place of config.json, model.safetensors, the index, a shard,
# checkpoint.json, train_state.json, optimizer.safetensors, the --data file, a
# --config file or a hardware profile used to block the open forever (issue 29,
# class 7). Each run gets 30 s; a hang shows as exit 124.
source "$(dirname "$0")/lib.sh"
command -v mkfifo > /dev/null || { echo "skipped: no mkfifo"; exit 77; }

# expect_refused PATH ARGS...: megatrain ARGS exits 1 at once, its last stderr line
# naming PATH as "not a regular file but a FIFO".
expect_refused() {
  local path=$1; shift
  timeout 30 "$MT" "$@" > "$TMP/out" 2> "$TMP/err"
  local got=$? last; last=$(tail -n 1 "$TMP/err")
  if [ $got -eq 124 ]; then bad "megatrain $*: hung on the FIFO $path (killed after 30 s)"; return; fi
  if [ $got -ne 1 ]; then bad "megatrain $*: exit $got (want 1): $last"; return; fi
  if ! grep -qF -- "$path: not a regular file but a FIFO" <<< "$last"; then bad "megatrain $*: last line lacks '$path: not a regular file but a FIFO': $last"; return; fi
  ok
}
# fifo_in DIR FILE: DIR (a copy of a model or checkpoint) with FILE replaced by a FIFO.
fifo_in() { rm -f "$1/$2" && mkfifo "$1/$2"; }

data=(--data $FIX/tokens.bin --batch 2 --seq-len 16 --backend cpu)
run=(--model $FIX/tiny_llama "${data[@]}" --lr 2e-3)

# --- an HF model directory (train --model and eval --model read the same files)
for f in config.json model.safetensors; do
  d=$TMP/m_${f%%.*}; cp -r $FIX/tiny_llama "$d"; fifo_in "$d" "$f"
  expect_refused "$d/$f" train --model "$d" "${data[@]}" --steps 1
  expect_refused "$d/$f" eval --model "$d" "${data[@]}"
done
expect_refused "$TMP/m_config/config.json" plan --model "$TMP/m_config" --batch 2 --seq-len 16 --precision fp32
fifo_in "$TMP" cfg.json
expect_refused "$TMP/cfg.json" train --config "$TMP/cfg.json" --init random "${data[@]}" --steps 1

# --- a sharded model: the index and one shard
"$MT" train "${run[@]}" --steps 1 --shard-size 200kB --save "$TMP/sh" > /dev/null 2>&1
check "a sharded save to read back" test -f "$TMP/sh/model.safetensors.index.json"
d=$TMP/sh_hf; mkdir -p "$d"; cp "$TMP/sh"/config.json "$TMP/sh"/model* "$d/"
cp -r "$d" "$TMP/sh_idx"; fifo_in "$TMP/sh_idx" model.safetensors.index.json
expect_refused "$TMP/sh_idx/model.safetensors.index.json" train --model "$TMP/sh_idx" "${data[@]}" --steps 1
cp -r "$d" "$TMP/sh_shard"; fifo_in "$TMP/sh_shard" model-00002-of-00003.safetensors
expect_refused "$TMP/sh_shard/model-00002-of-00003.safetensors" train --model "$TMP/sh_shard" "${data[@]}" --steps 1
expect_refused "$TMP/sh_shard/model-00002-of-00003.safetensors" eval --model "$TMP/sh_shard" "${data[@]}"

# --- a checkpoint (--resume): each of its files
"$MT" train "${run[@]}" --steps 1 --save "$TMP/ck" > /dev/null 2>&1
check "a checkpoint to resume" test -f "$TMP/ck/checkpoint.json"
for f in checkpoint.json train_state.json config.json model.safetensors optimizer.safetensors; do
  d=$TMP/ck_${f%%.*}; cp -r "$TMP/ck" "$d"; fifo_in "$d" "$f"
  expect_refused "$d/$f" train --resume "$d" --steps 2
done

# --- the --data file and a hardware profile
fifo_in "$TMP" tokens.bin
expect_refused "$TMP/tokens.bin" train --model $FIX/tiny_llama --data "$TMP/tokens.bin" --batch 2 --seq-len 16 --steps 1 --backend cpu
expect_refused "$TMP/tokens.bin" eval --model $FIX/tiny_llama --data "$TMP/tokens.bin" --batch 2 --seq-len 16 --backend cpu
fifo_in "$TMP" hw.json
expect_refused "$TMP/hw.json" plan --model $FIX/tiny_llama --batch 2 --seq-len 16 --precision fp32 --hardware "$TMP/hw.json"
expect_refused "$TMP/hw.json" train --model $FIX/tiny_llama --data synthetic --batch 2 --seq-len 16 --steps 1 --backend sim --hardware "$TMP/hw.json"

# A character device in place of the weights is refused the same way (it never ends).
d=$TMP/m_dev; cp -r $FIX/tiny_llama "$d"; rm "$d/model.safetensors"; ln -s /dev/zero "$d/model.safetensors"
timeout 30 "$MT" train --model "$d" "${data[@]}" --steps 1 > /dev/null 2> "$TMP/err"
rc=$?
check "/dev/zero as model.safetensors: exit 1 ($(tail -n 1 "$TMP/err"))" test $rc -eq 1
check "named as a character device" grep -qF "$d/model.safetensors: not a regular file but a character device" "$TMP/err"
finish
