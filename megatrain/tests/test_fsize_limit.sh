#!/usr/bin/env bash
# Under `ulimit -f` (RLIMIT_FSIZE) no write kills megatrain with SIGXFSZ (issue 39,
# class 3): a save whose largest file cannot fit is refused before training,
# naming the limit with a HINT; one that meets the limit while written (past that
# check, MT_FAULT_NO_SPACE_CHECK=1) exits 1 naming the file, the limit and what
# --save keeps, the staged save removed and the previous checkpoint whole; --trace,
# --dump-grads, --log and stdout that meet it exit 1 naming the option, a replaced
# file intact.
source "$(dirname "$0")/lib.sh"

run=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
last_err() { tail -n 1 "$TMP/err" | tr '\r' '\n' | tail -n 1; }
leftovers() { find "$(dirname "$1")" -maxdepth 1 -name ".$(basename "$1").tmp-*" -o -maxdepth 1 -name ".$(basename "$1").old-*"; }
# limited KB CMD...: CMD under `ulimit -f KB` (the shell's 1024-byte blocks), stdout to $TMP/out, stderr to $TMP/err.
limited() {
  local kb=$1; shift
  (ulimit -f "$kb" && exec "$@") > "$TMP/out" 2> "$TMP/err"
}

d=$TMP/ck
"$MT" "${run[@]}" --steps 2 --save "$d" > /dev/null 2>&1
cp -r "$d" "$TMP/ck.copy"
intact() { same_state "$d" "$TMP/ck.copy" && cmp -s "$d/checkpoint.json" "$TMP/ck.copy/checkpoint.json"; }

# The checkpoint's files (400 kB and 800 kB) cannot fit under 100 kB.
limited 100 "$MT" train --resume "$d" --steps 4 --save "$d"
rc=$?
check "a save over the limit: refused before training, exit 1 ($(last_err))" test $rc -eq 1 -a ! -s "$TMP/out"
check "  names the limit in bytes and ulimit's blocks" grep -q "over the file size limit of 102400 bytes .*ulimit -f. 100" "$TMP/err"
check "  with a HINT" grep -q "HINT: raise it" "$TMP/err"
check "  the checkpoint is whole" intact
check "  nothing staged" test -z "$(leftovers "$d")"

MT_FAULT_NO_SPACE_CHECK=1 limited 100 "$MT" train --resume "$d" --steps 4 --save "$d"
rc=$?
check "the limit met while writing: exit 1, not SIGXFSZ ($rc; $(last_err))" test $rc -eq 1
check "  one line naming the staged file, the limit, what is kept, and a HINT" \
  grep -qE "^megatrain: error: step 4: not saved: $TMP/.ck.tmp-[^ ]*/[a-z]+.safetensors: write failed: File too large: over the file size limit of 102400 bytes .*HINT: raise it.*; $d keeps step 2$" <<< "$(last_err)"
check "  the staged save is removed" test -z "$(leftovers "$d")"
check "  the previous checkpoint is whole" intact
"$MT" train --resume "$d" --steps 3 --save "$TMP/res" > /dev/null 2> "$TMP/err"
rc=$?
check "  and resumes ($(last_err))" test $rc -eq 0

MT_FAULT_NO_SPACE_CHECK=1 limited 100 "$MT" "${run[@]}" --steps 1 --save "$TMP/first"
rc=$?
check "a first save that meets the limit: exit 1 ($(last_err))" test $rc -eq 1
check "  no checkpoint and nothing staged" test ! -e "$TMP/first" -a -z "$(leftovers "$TMP/first")"

# --trace (19 kB for 3 steps) under 8 kB: the run exits 1 naming it; the old file stays.
echo old > "$TMP/trace.json"
limited 8 "$MT" "${run[@]}" --steps 3 --trace "$TMP/trace.json"
rc=$?
check "--trace over the limit: exit 1 ($(last_err))" test $rc -eq 1
check "  names --trace, the error and the limit" grep -q -- "--trace $TMP/trace.json: write failed: File too large: over the file size limit of 8192 bytes" "$TMP/err"
check "  the replaced file is intact, no temporary left" test "$(cat "$TMP/trace.json")" = old -a -z "$(find "$TMP" -name 'trace.json.*')"

# --dump-grads (400 kB) under 100 kB.
echo old > "$TMP/grads.st"
limited 100 "$MT" "${run[@]}" --steps 1 --dump-grads "$TMP/grads.st"
rc=$?
check "--dump-grads over the limit: exit 1 ($(last_err))" test $rc -eq 1
check "  names --dump-grads and the limit" grep -q -- "--dump-grads $TMP/grads.st: .*File too large: over the file size limit of 102400 bytes" "$TMP/err"
check "  the replaced file is intact" test "$(cat "$TMP/grads.st")" = old

# --log (600 bytes a line) and stdout under 2 kB.
(ulimit -f 2 && exec "$MT" "${run[@]}" --steps 8 --log "$TMP/log.jsonl") > /dev/null 2> "$TMP/err"
rc=$?
check "--log over the limit: exit 1 ($(last_err))" test $rc -eq 1
check "  names --log and the limit" grep -q -- "--log $TMP/log.jsonl: write failed: File too large: over the file size limit of 2048 bytes" "$TMP/err"
(ulimit -f 2 && exec "$MT" "${run[@]}" --steps 8) > "$TMP/stdout.jsonl" 2> "$TMP/err"
rc=$?
check "stdout into a file over the limit: exit 1 ($(last_err))" test $rc -eq 1
check "  names stdout and the limit" grep -q "stdout: write failed: File too large: over the file size limit of 2048 bytes" "$TMP/err"
finish
