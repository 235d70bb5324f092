#!/usr/bin/env bash
# --device-optimizer (engine/device_optimizer.h) on the cpu backend, whose device AdamW is
# the host's own code on memory obtained through the backend: a run with some or all units
# updated "on the device" ends with the weights, moments and losses of the run with the
# split off (today's engine), in every precision, speculating or not, in update parts; a run
# saved under one split resumes under another exactly as an uninterrupted run; bad values
# are refused with exit 2.
source "$(dirname "$0")/lib.sh"

common=(--model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 32 --grad-accum 2 --lr 2e-3 --warmup 2
        --backend cpu)
losses() { jq -r '"\(.step) \(.loss) \(.grad_norm) \(.clip_factor)"' "$1"; }
same_run() { # same_run WHAT A B: losses, weights and moments bitwise
  check "$1: losses" test "$(losses "$2.jsonl")" = "$(losses "$3.jsonl")"
  check "$1: weights bitwise" cmp -s "$2/model.safetensors" "$3/model.safetensors"
  check "$1: moments bitwise" cmp -s "$2/optimizer.safetensors" "$3/optimizer.safetensors"
}

for prec in paper mixed fp32; do
  "$MT" train "${common[@]}" --precision $prec --steps 4 --device-optimizer off --save $TMP/off_$prec \
    > $TMP/off_$prec.jsonl 2> $TMP/off_$prec.err
  check "split off ($prec)" test $? -eq 0
  check "off says nothing of a split ($prec)" test -z "$(grep -- --device-optimizer $TMP/off_$prec.err)"
  for n in 1 2 100; do
    r=$TMP/dev${n}_$prec
    "$MT" train "${common[@]}" --precision $prec --steps 4 --device-optimizer $n --save $r > $r.jsonl 2> $r.err
    check "split $n ($prec)" test $? -eq 0
    want=$n; [ $n = 100 ] && want=4 # tiny_llama: 2 layers, so 4 units in all
    check "split $n names $want units ($prec)" grep -q -- "--device-optimizer: $want units" $r.err
    same_run "split $n = off ($prec)" $r $TMP/off_$prec
  done
done

# Speculating (each step clips at 1.0: rolled back) and in update parts, the device's units beside.
for extra in "--speculative-step true" "--update-parts 3"; do
  tag=${extra//[ -]/_}
  "$MT" train "${common[@]}" --precision paper --steps 4 $extra --save $TMP/h$tag > $TMP/h$tag.jsonl 2>/dev/null
  "$MT" train "${common[@]}" --precision paper --steps 4 $extra --device-optimizer 3 --save $TMP/d$tag \
    > $TMP/d$tag.jsonl 2>/dev/null
  check "$extra with the split" test $? -eq 0
  same_run "$extra: split 3 = off" $TMP/d$tag $TMP/h$tag
done

# Saved under one split, resumed under another: the uninterrupted run's state, bitwise.
"$MT" train "${common[@]}" --precision mixed --steps 6 --save $TMP/full > $TMP/full.jsonl 2>/dev/null
"$MT" train "${common[@]}" --precision mixed --steps 3 --device-optimizer 2 --save $TMP/half2 > /dev/null 2>&1
"$MT" train --resume $TMP/half2 --steps 6 --device-optimizer off --save $TMP/res_off > $TMP/res_off.jsonl 2>/dev/null
check "saved with split 2, resumed off" test $? -eq 0
"$MT" train "${common[@]}" --precision mixed --steps 3 --save $TMP/half0 > /dev/null 2>&1
"$MT" train --resume $TMP/half0 --steps 6 --device-optimizer 100 --save $TMP/res_all > $TMP/res_all.jsonl 2>/dev/null
check "saved off, resumed with every unit on the device" test $? -eq 0
for r in res_off res_all; do
  check "$r: steps 4..6 lose as the full run's" test "$(losses $TMP/$r.jsonl)" = "$(losses $TMP/full.jsonl | tail -n 3)"
  check "$r: weights bitwise" cmp -s $TMP/full/model.safetensors $TMP/$r/model.safetensors
  check "$r: moments bitwise" cmp -s $TMP/full/optimizer.safetensors $TMP/$r/optimizer.safetensors
done

expect 2 "--device-optimizer with --dump-grads" train "${common[@]}" --steps 1 --device-optimizer 1 --dump-grads $TMP/g.st
expect 2 "--device-optimizer some" train "${common[@]}" --steps 1 --device-optimizer some
expect 2 "--device-optimizer -3" train "${common[@]}" --steps 1 --device-optimizer -3
finish
