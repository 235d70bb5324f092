#!/usr/bin/env bash
# Every write is checked and no signal kills a run mid-step (issue 29, class 3).
# stdout on a full device: train, eval, plan and --version exit 1 naming stdout
# (a train stops after the step whose line was lost and keeps its --save); --log
# and --trace on a full device or filesystem exit 1 naming the option (a --trace
# written after the last save says the state is saved); SIGINT, SIGTERM, SIGHUP
# and SIGPIPE (stdout closed early, as by `| head -1`) each finish the step,
# save, name the signal and exit 130, and the save resumes. The full-filesystem
# case needs a tmpfs (root, or a user + mount namespace); skipped with a line
# where neither is permitted.
source "$(dirname "$0")/lib.sh"

run=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
last_err() { tail -n 1 "$TMP/err" | tr '\r' '\n' | tail -n 1; }

# --- --log on a full filesystem (a tmpfs filled up). As root directly, else in a
# user + mount namespace; skipped where neither is permitted.
full_fs_case() {
  local mnt=$1
  head -c 600000 /dev/zero > "$mnt/filler" 2> /dev/null # the rest of the 512 kB tmpfs
  "$MT" "${run[@]}" --steps 3 --log "$mnt/log.jsonl" > /dev/null 2> "$TMP/err"
  rc=$?
  check "--log on a full filesystem: exit 1 ($(last_err))" test $rc -eq 1
  check "--log on a full filesystem: names the option and the device error" \
    grep -q -- "--log $mnt/log.jsonl: write failed: No space left on device" "$TMP/err"
}
if [ "${1:-}" = --full-fs ]; then # only this case, inside a user + mount namespace (the end of this file)
  mkdir -p "$TMP/mnt" && mount -t tmpfs -o size=512k tmpfs "$TMP/mnt" || exit 77
  trap 'umount "$TMP/mnt" 2>/dev/null; rm -rf "$TMP"' EXIT
  full_fs_case "$TMP/mnt"
  finish
fi

# --- stdout on a full device (/dev/full: every write fails with ENOSPC).
"$MT" "${run[@]}" --steps 3 > /dev/full 2> "$TMP/err"
rc=$?
check "train, stdout full: exit 1 ($(last_err))" test $rc -eq 1
check "train, stdout full: the error names stdout and the device error" grep -q "stdout: write failed: No space left on device" "$TMP/err"
check "train, stdout full: it stopped after step 1, not trained to the end" grep -q "the run stopped after step 1" "$TMP/err"
"$MT" "${run[@]}" --steps 3 --save "$TMP/ck" > /dev/full 2> "$TMP/err"
rc=$?
check "train --save, stdout full: exit 1 ($(last_err))" test $rc -eq 1
check "train --save, stdout full: the error says where the state is" grep -q "it is saved in $TMP/ck" "$TMP/err"
check "train --save, stdout full: the step it stopped at is saved" test "$(jq .step "$TMP/ck/checkpoint.json")" = 1
"$MT" eval --model "$TMP/ck" --data $FIX/tokens.bin --batch 2 --seq-len 16 --steps 2 --backend cpu > /dev/full 2> "$TMP/err"
rc=$?
check "eval, stdout full: exit 1 (its only result is lost) ($(last_err))" test $rc -eq 1
check "eval, stdout full: names stdout" grep -q "stdout: write failed: No space left on device" "$TMP/err"
"$MT" plan --model $FIX/tiny_llama --batch 2 --seq-len 16 --precision fp32 > /dev/full 2> "$TMP/err"
rc=$?
check "plan, stdout full: exit 1 ($(last_err))" test $rc -eq 1
check "plan, stdout full: names stdout" grep -q "stdout: write failed" "$TMP/err"
"$MT" --version > /dev/full 2> "$TMP/err"
check "--version, stdout full: exit 1" test $? -eq 1

# --- --log and --trace on a full device (written through, core/out_file.h).
"$MT" "${run[@]}" --steps 3 --log /dev/full > /dev/null 2> "$TMP/err"
rc=$?
check "--log /dev/full: exit 1 ($(last_err))" test $rc -eq 1
check "--log /dev/full: names the option and the device error" grep -q -- "--log /dev/full: write failed: No space left on device" "$TMP/err"
# --trace was written through a temporary renamed over its path: as root that
# replaced the device node, so a copy of /dev/full made in TMP stands in for it
# (without root the rename into /dev is refused, and /dev/full itself is safe).
full=/dev/full
mknod "$TMP/full" c 1 7 2> /dev/null && full=$TMP/full
"$MT" "${run[@]}" --steps 2 --trace "$full" --save "$TMP/ck2" > /dev/null 2> "$TMP/err"
rc=$?
check "--trace $full: exit 1 ($(last_err))" test $rc -eq 1
check "--trace $full: names the option, and that the trained state is saved" \
  grep -q -- "--trace $full: write failed: No space left on device; the trained state is saved in $TMP/ck2" "$TMP/err"
check "--trace $full: the save is whole" test "$(jq .step "$TMP/ck2/checkpoint.json")" = 2
check "$full is still a character device" test -c "$full"

# --- stdout closed early: SIGPIPE ends the run as SIGTERM does.
"$MT" "${run[@]}" --steps 100000 --save "$TMP/pipe" 2> "$TMP/err" | head -n 1 > "$TMP/first"
rc=${PIPESTATUS[0]}
check "| head -1: exit 130 ($(last_err))" test "$rc" -eq 130
check "| head -1: says SIGPIPE (stdout was closed)" grep -q "interrupted by SIGPIPE (stdout was closed) after step [0-9]*; saved to $TMP/pipe" "$TMP/err"
k=$(jq .step "$TMP/pipe/checkpoint.json" 2> /dev/null)
check "| head -1: a checkpoint of the step it stopped after ($k)" grep -q "after step $k;" "$TMP/err"

# --- each signal: finish the step, save, say which, exit 130; the save resumes.
for sig in INT TERM HUP PIPE; do
  d=$TMP/sig$sig
  : > "$d.jsonl" # there before the loop below reads it: a kill must not reach the shell's fork before its exec
  "$MT" "${run[@]}" --steps 100000 --save "$d" > "$d.jsonl" 2> "$TMP/err" &
  pid=$!
  while kill -0 $pid 2> /dev/null && [ "$(wc -l < "$d.jsonl")" -lt 2 ]; do sleep 0.02; done
  kill -$sig $pid
  wait $pid
  rc=$?
  check "SIG$sig: exit 130 ($(last_err))" test $rc -eq 130
  check "SIG$sig: names the signal and the save" grep -q "interrupted by SIG$sig.* after step [0-9]*; saved to $d" "$TMP/err"
  k=$(jq .step "$d/checkpoint.json" 2> /dev/null)
  check "SIG$sig: the checkpoint is the last step reported ($k)" test "$k" = "$(tail -n 1 "$d.jsonl" | jq .step)"
  "$MT" train --resume "$d" --steps $((k + 1)) --save "$d" > /dev/null 2> "$TMP/err"
  rc=$?
  check "SIG$sig: the save resumes ($(last_err))" test $rc -eq 0
done

# --- --log on a full filesystem (full_fs_case above).
mkdir -p "$TMP/mnt"
if mount -t tmpfs -o size=512k tmpfs "$TMP/mnt" 2> /dev/null; then
  trap 'umount "$TMP/mnt" 2>/dev/null; rm -rf "$TMP"' EXIT
  full_fs_case "$TMP/mnt"
elif unshare -rm true 2> /dev/null; then
  unshare -rm env MT_BIN="${MT_BIN:-}" bash "$0" --full-fs
  rc=$?
  if [ $rc -eq 77 ]; then echo "test_output_writes: full-filesystem case skipped: no tmpfs in a user namespace"
  else check "full-filesystem case (in a user namespace)" test $rc -eq 0; fi
else
  echo "test_output_writes: full-filesystem case skipped: mounting a tmpfs is not permitted here"
fi
finish
