#!/usr/bin/env bash
# `megatrain eval`: the loss of the first window equals the training loss of
# step 1 (same forward, before any update); without --steps it covers the file.
source "$(dirname "$0")/lib.sh"

args=(--model $FIX/tiny_qwen3 --data $FIX/tokens.bin --batch 2 --seq-len 32 --backend cpu --precision fp32)
ev=$("$MT" eval "${args[@]}" --steps 1 2>/dev/null)
check "eval exits 0" test $? -eq 0
tr=$("$MT" train "${args[@]}" --steps 1 2>/dev/null)
check "eval loss of window 1 == train loss of step 1" test "$(jq .loss <<< "$ev")" = "$(jq .loss <<< "$tr")"
check "eval reports its tokens" test "$(jq .tokens <<< "$ev")" = 64
all=$("$MT" eval "${args[@]}" 2>/dev/null)
check "eval covers every full window of the file by default (8192 tokens -> 127 x 64)" test "$(jq .tokens <<< "$all")" = 8128
check "eval loss is near ln(256) for a random-init model" jq -e '.loss > 5.0 and .loss < 6.0' <<< "$all"

# eval takes every schedule train takes, with train's knobs, and gets the same loss
# (the same kernels in the same order: bitwise on the cpu backend). The schedules
# are the table's, as --help lists them, so a new one is covered by itself.
# (the indented lines under "Schedules", up to the next heading: the peers follow, and eval takes no peer)
mapfile -t table < <("$MT" --help 2>&1 | awk '/^Schedules/ {on = 1; next} on && /^  / {print $1; next} on {exit}')
check "--help lists the schedule table (at least megatrain, resident, zero3, naive)" \
  test "$(printf '%s\n' "${table[@]}" | grep -cxE 'megatrain|resident|zero3|naive')" -eq 4
for sched in "${table[@]}" "megatrain --checkpoint-interval 2 --weight-buffers 3 --bind copy" \
             "zero3 --zero3-prefetch-bucket-size 1000 --zero3-pin-memory false" "megatrain --offload-checkpoints true"; do
  # shellcheck disable=SC2086
  got=$("$MT" eval "${args[@]}" --steps 4 --schedule $sched 2>"$TMP/err")
  check "eval --schedule $sched exits 0 ($(head -c 200 "$TMP/err"))" test $? -eq 0
  check "eval --schedule $sched: the megatrain schedule's loss" \
    test "$(jq .loss <<< "$got")" = "$("$MT" eval "${args[@]}" --steps 4 2>/dev/null | jq .loss)"
done

# One set of data sources (docs/DESIGN.md, CLI): train takes FILE|synthetic|embedded, eval a
# token file only; the other two are refused in one line, before any model is read.
nodata=(--model $FIX/tiny_qwen3 --batch 2 --seq-len 32 --backend cpu --precision fp32) # each option once
for src in synthetic embedded; do
  "$MT" eval "${nodata[@]}" --data $src >"$TMP/out" 2>"$TMP/err"; rc=$?
  check "eval --data $src is refused (exit $rc, 1..125)" test "$rc" -ge 1 -a "$rc" -le 125
  check "eval --data $src: one line saying eval reads a token file only ($(head -c 200 "$TMP/err"))" \
    test "$(wc -l < "$TMP/err")" -eq 1 -a "$(grep -c "eval --data $src: eval reads a token file only" "$TMP/err")" -eq 1
  check "eval --data $src: nothing on stdout" test ! -s "$TMP/out"
  "$MT" eval "${nodata[@]}" --data ./$src >/dev/null 2>"$TMP/err"
  check "eval --data ./$src is a path (no such file: $(head -c 200 "$TMP/err"))" grep -q "\./$src" "$TMP/err"
done
finish
