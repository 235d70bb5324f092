#!/usr/bin/env bash
# A full disk during --save: the run exits 1 naming the file and the device
# error, the staged save is removed, and the last good checkpoint stays whole
# and resumes onto the uninterrupted trajectory. Needs a small tmpfs: mounted
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

"$MT" train "${run[@]}" --steps 4 --save-every 1 --save "$mnt/ck" > /dev/null 2> "$TMP/err"
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

# No room even for the first save: nothing appears under the final name.
"$MT" train "${run[@]}" --steps 2 --save "$mnt/ck2" > /dev/null 2> "$TMP/err"
rc=$?
check "first save on a full disk: exit 1" test $rc -eq 1
check "first save on a full disk: no partial checkpoint" test ! -e "$mnt/ck2"
check "first save on a full disk: no staged leftovers" test -z "$(find "$mnt" -maxdepth 1 -name '.ck2.tmp-*')"
check "the other checkpoint is untouched" test "$(jq .step "$mnt/ck/checkpoint.json")" = 1
finish
