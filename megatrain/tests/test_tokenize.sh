#!/usr/bin/env bash
# tools/tokenize.py --bytes writes the token file megatrain reads; bad input is one line.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "skipped: no python3"; exit 77; }
printf 'In the beginning God created the heaven and the earth.\n' > "$TMP/a.txt"
python3 -m megatrain.tools.tokenize --bytes --out "$TMP/t.bin" "$TMP/a.txt" 2> "$TMP/err"
check "tokenize --bytes exits 0" test $? -eq 0
check "4 bytes per token" test "$(stat -c %s "$TMP/t.bin")" = $((4 * $(stat -c %s "$TMP/a.txt")))
check "no temporary file left" test ! -e "$TMP/t.bin.tmp"
check "first token is 'I' (73)" test "$(od -An -tu4 -N4 "$TMP/t.bin" | tr -d ' ')" = 73
"$MT" eval --model $FIX/tiny_llama --data "$TMP/t.bin" --batch 1 --seq-len 16 > "$TMP/ev.json" 2>/dev/null
check "megatrain eval reads it" jq -e '.tokens == 48' "$TMP/ev.json"
python3 -m megatrain.tools.tokenize --bytes --out "$TMP/x.bin" "$TMP/missing.txt" 2> "$TMP/err"
check "missing input fails with one line naming it" test $? -ne 0 -a "$(wc -l < "$TMP/err")" = 1
check "and no output file" test ! -e "$TMP/x.bin"
finish
