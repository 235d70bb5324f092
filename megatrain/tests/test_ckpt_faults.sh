#!/usr/bin/env bash
# A checkpoint survives faults: SIGKILL at each point of the directory switch
# (test hooks) and at random moments during repeated saves leaves a checkpoint
# that resumes onto the uninterrupted trajectory, bitwise; leftovers of a killed
# save are removed by the next one; a second writer is refused at once.
source "$(dirname "$0")/lib.sh"

N=8
run=(--model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
leftovers() { find "$(dirname "$1")" -maxdepth 1 -name ".$(basename "$1").tmp-*" -o -maxdepth 1 -name ".$(basename "$1").old-*"; }
same_as() { # same_as REF DIR: weights and moments bitwise equal
  cmp -s "$1/model.safetensors" "$2/model.safetensors" && cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"
}
losses() { jq -r '"\(.step) \(.loss)"' "$1"; }

ref=$TMP/ref
"$MT" train "${run[@]}" --steps $N --save "$ref" > "$ref.jsonl" 2>/dev/null
check "reference run" test $? -eq 0

# --- SIGKILL at each point of a save (test hooks), then resume in place.
# staged:3 -> after the third staged save is complete, before it is switched in;
# exchanged:2 -> right after the switch, before the old checkpoint is removed;
# moved-aside:2 (no RENAME_EXCHANGE) -> DIR moved aside, the new one not yet in.
for point in staged:3 exchanged:2 moved-aside:2; do
  d=$TMP/kill_${point%%:*}
  env=(MT_FAULT_KILL_AT=$point)
  [ "$point" = moved-aside:2 ] && env+=(MT_FAULT_NO_EXCHANGE=1)
  env "${env[@]}" "$MT" train "${run[@]}" --steps $N --save-every 1 --save "$d" > /dev/null 2>&1 &
  wait $!
  check "killed at $point (SIGKILL: status 137)" test $? -eq 137
  check "a leftover of the killed save exists ($point)" test -n "$(leftovers "$d")"
  if [ "$point" = moved-aside:2 ]; then
    check "DIR is missing after a kill between the two renames" test ! -e "$d"
    "$MT" train --resume "$d" --steps $N > /dev/null 2> "$TMP/err"
    check "resume without --save names the moved-aside checkpoint" grep -q "\.kill_moved-aside\.old-" "$TMP/err"
  fi
  "$MT" train --resume "$d" --steps $N --save "$d" > "$d.res.jsonl" 2> "$TMP/err"
  rc=$?
  check "resume after the kill at $point: $(tail -n 1 "$TMP/err")" test $rc -eq 0
  check "leftovers removed by the next save ($point)" test -z "$(leftovers "$d")"
  check "on the uninterrupted trajectory, bitwise ($point)" same_as "$ref" "$d"
  k=$(head -n 1 "$d.res.jsonl" | jq .step)
  check "resumed losses match the reference ($point)" test "$(losses "$d.res.jsonl")" = "$(losses "$ref.jsonl" | tail -n $((N - k + 1)))"
done

# The whole run on the no-exchange path: same result, nothing left behind.
d=$TMP/noexch
MT_FAULT_NO_EXCHANGE=1 "$MT" train "${run[@]}" --steps $N --save-every 1 --save "$d" > /dev/null 2>&1
check "no-exchange path: run" test $? -eq 0
check "no-exchange path: same result" same_as "$ref" "$d"
check "no-exchange path: no leftovers" test -z "$(leftovers "$d")"

# --- SIGKILL at random moments during repeated saves (a save every step).
M=30
ref30=$TMP/ref30
"$MT" train "${run[@]}" --steps $M --save "$ref30" > "$ref30.jsonl" 2>/dev/null
for trial in 1 2 3 4 5; do
  d=$TMP/rand$trial
  at=$((3 + RANDOM % (M - 6)))           # after this many steps are reported...
  sub=$(printf '0.%03d' $((RANDOM % 40)))  # ...and up to 40 ms into the save that follows
  : > "$d.jsonl"
  "$MT" train "${run[@]}" --steps $M --save-every 1 --save "$d" > "$d.jsonl" 2>/dev/null &
  pid=$!
  while kill -0 $pid 2>/dev/null && [ "$(wc -l < "$d.jsonl")" -lt $at ]; do sleep 0.005; done
  sleep "$sub"
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  "$MT" train --resume "$d" --steps $M --save "$d" > "$d.res.jsonl" 2> "$TMP/err"
  rc=$?
  check "trial $trial (kill after step $at + ${sub}s): resume: $(tail -n 1 "$TMP/err")" test $rc -eq 0
  check "trial $trial: on the uninterrupted trajectory, bitwise" same_as "$ref30" "$d"
  check "trial $trial: no leftovers" test -z "$(leftovers "$d")"
done

# --- Two writers: the second fails at once, naming the first; the first is unharmed.
d=$TMP/shared
"$MT" train "${run[@]}" --steps 100000 --save-every 50 --save "$d" > "$TMP/a.jsonl" 2> "$TMP/a.err" &
a=$!
while kill -0 $a 2>/dev/null && [ ! -s "$TMP/a.jsonl" ]; do sleep 0.02; done
"$MT" train "${run[@]}" --steps 3 --save "$d" > "$TMP/b.out" 2> "$TMP/b.err"
rc=$?
check "second writer refused (exit 1)" test $rc -eq 1
check "second writer names the first ($(cat "$TMP/b.err"))" grep -q "another megatrain (pid $a)" "$TMP/b.err"
ln -s "$d" "$TMP/alias"
"$MT" train "${run[@]}" --steps 3 --save "$TMP/alias/" > /dev/null 2> "$TMP/b.err"
check "a second writer through a symlink is refused too" grep -q "another megatrain (pid $a)" "$TMP/b.err"
check "the first writer is still running" kill -0 $a
kill -INT $a
wait $a
check "first writer: SIGINT saves and exits 130" test $? -eq 130
k=$(jq .step "$d/checkpoint.json")
check "first writer's checkpoint is its last step ($k)" test "$k" = "$(tail -n 1 "$TMP/a.jsonl" | jq .step)"
"$MT" train --resume "$d" --steps $((k + 1)) --save "$d" > /dev/null 2>&1
check "after the first writer exits, the directory is writable again" test $? -eq 0

# A stop signal that lands while the run proves its switch (DIR renamed aside and back,
# before training) acts once DIR is back: the process ends by the signal's default action
# (143 for SIGTERM), DIR whole, nothing moved aside, and the next run resumes it.
k=$(jq .step "$d/checkpoint.json")
MT_FAULT_TERM_AT=proved-aside "$MT" train --resume "$d" --steps $((k + 1)) > /dev/null 2> "$TMP/b.err"
rc=$?
check "SIGTERM while DIR is aside to prove the switch: ends by it (rc $rc)" test $rc -eq 143
check "  DIR is there, whole, at its step" test "$(jq .step "$d/checkpoint.json" 2> /dev/null)" = "$k"
check "  nothing left aside ($(ls -a "$TMP" | grep -c '^\.shared\.old-'))" test -z "$(ls -a "$TMP" | grep '^\.shared\.old-')"
"$MT" train --resume "$d" --steps $((k + 1)) > /dev/null 2> "$TMP/b.err"
check "  the next run resumes it ($(tail -n 1 "$TMP/b.err"))" test $? -eq 0
finish
