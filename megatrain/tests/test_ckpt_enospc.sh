#!/usr/bin/env bash
# A full disk during --save: the space a save needs is checked first (statvfs),
# and a save that does not fit is refused with the numbers; past that check
# (MT_FAULT_NO_SPACE_CHECK=1 skips it, as a disk filled by someone else would),
# the run exits 1 naming the file and the device error. Either way the staged
# save is removed, and the last good checkpoint stays whole and resumes onto the
# uninterrupted trajectory. Needs a small tmpfs: mounted
# directly as root, else inside a user + mount namespace (unshare -rm); skipped
# (77) where neither is permitted.
if [ "$(id -u)" != 0 ] && [ -z "${MT_ENOSPC_NS:-}" ]; then
  if unshare -rm true 2>/dev/null; then exec unshare -rm env MT_ENOSPC_NS=1 bash "$0" "$@"; fi
  echo "test_ckpt_enospc: skipped: not root and no user namespaces to mount a tmpfs in"
  exit 77
fi
source "$(dirname "$0")/lib.sh"

mnt=$TMP/mnt
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=2m tmpfs "$mnt" 2>/dev/null; then
  echo "test_ckpt_enospc: skipped: mounting a tmpfs is not permitted here"
  exit 77
fi
trap 'umount "$mnt" 2>/dev/null; rm -rf "$TMP"' EXIT

# tiny_llama in fp32: a checkpoint is ~1.25 MB, so the 2 MB tmpfs holds one but
# not a second one staged beside it.
run=(--model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
"$MT" train "${run[@]}" --steps 4 --save "$TMP/ref" > /dev/null 2>&1
check "reference run" test $? -eq 0

# The check before each save: step 1's fits, step 2's (beside step 1's) does not.
"$MT" train "${run[@]}" --steps 4 --save-every 1 --save "$mnt/pre" > /dev/null 2> "$TMP/err"
rc=$?
err=$(tail -n 1 "$TMP/err")
check "space check: exit 1 ($err)" test $rc -eq 1
check "space check: the bytes needed and free, and where" grep -qE "step 2: not saved: --save $mnt/pre: a checkpoint needs [0-9.]+ MB \(weights [0-9.]+ kB in 1 file, optimizer state [0-9.]+ kB in 1 file.* but $mnt has [0-9.]+ kB free \([0-9]+ bytes free, [0-9]+ needed\)" <<< "$err"
check "space check: says what is kept" grep -q "$mnt/pre keeps step 1" <<< "$err"
check "space check: nothing staged" test "$(ls -A "$mnt" | sort | tr '\n' ' ')" = ".pre.lock pre "
rm -rf "$mnt/pre" "$mnt/.pre.lock"

MT_FAULT_NO_SPACE_CHECK=1 "$MT" train "${run[@]}" --steps 4 --save-every 1 --save "$mnt/ck" > /dev/null 2> "$TMP/err"
rc=$?
err=$(tail -n 1 "$TMP/err")
check "full disk: exit 1 ($err)" test $rc -eq 1
check "full disk: the error names the device error" grep -q "No space left on device" <<< "$err"
check "full disk: the error names the file" grep -q "$mnt/.ck.tmp-" <<< "$err"
check "full disk: the error says what is kept" grep -q "$mnt/ck keeps step 1" <<< "$err"
check "full disk: the staged save is removed" test "$(ls -A "$mnt" | sort | tr '\n' ' ')" = ".ck.lock ck "
check "full disk: the kept checkpoint is step 1" test "$(jq .step "$mnt/ck/checkpoint.json")" = 1
"$MT" train --resume "$mnt/ck" --steps 4 --save "$TMP/res" > /dev/null 2> "$TMP/err"
rc=$?
check "the kept checkpoint resumes ($(tail -n 1 "$TMP/err"))" test $rc -eq 0
check "onto the uninterrupted trajectory, bitwise" cmp -s "$TMP/ref/model.safetensors" "$TMP/res/model.safetensors"
check "moments too" cmp -s "$TMP/ref/optimizer.safetensors" "$TMP/res/optimizer.safetensors"

# No room even for the first save: refused before training (the check), or at the
# write (past it); either way nothing appears under the final name.
"$MT" train "${run[@]}" --steps 2 --save "$mnt/ck2" > "$TMP/out" 2> "$TMP/err"
rc=$?
check "first save on a full disk: refused before training ($(tail -n 1 "$TMP/err"))" test $rc -eq 1 -a ! -s "$TMP/out"
check "  naming the numbers" grep -q "a checkpoint needs .* free" "$TMP/err"
MT_FAULT_NO_SPACE_CHECK=1 "$MT" train "${run[@]}" --steps 2 --save "$mnt/ck2" > /dev/null 2> "$TMP/err"
rc=$?
check "first save on a full disk: exit 1" test $rc -eq 1
check "  the device error" grep -q "No space left on device" "$TMP/err"
check "first save on a full disk: no partial checkpoint" test ! -e "$mnt/ck2"
check "first save on a full disk: no staged leftovers" test -z "$(find "$mnt" -maxdepth 1 -name '.ck2.tmp-*')"
check "the other checkpoint is untouched" test "$(jq .step "$mnt/ck/checkpoint.json")" = 1
finish
