#!/usr/bin/env bash
# Files the user writes into a checkpoint directory while a run saves into it
# every step (issue 39, class 1): every file whose write succeeded is in DIR at the
# end, with what was last written to it, whatever point of a save it landed in
# (before the carry, between the carry and the switch, after it), in DIR or in a
# subdirectory of it (one made again while the save moved it joins it); a file replaced
# by rename holds its last version; one removed during the run stays removed; no
# temporary is left. Both switches: the exchange, and the fallback that moves DIR
# aside (MT_FAULT_NO_EXCHANGE=1), where a write that lands while DIR is away fails
# and is not counted. A save killed right after the switch: its next run carries
# what was written late into the previous checkpoint.
source "$(dirname "$0")/lib.sh"

run=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
last_err() { tail -n 1 "$TMP/err" | tr '\r' '\n' | tail -n 1; }
leftovers() { find "$(dirname "$1")" -maxdepth 1 -name ".$(basename "$1").tmp-*" -o -maxdepth 1 -name ".$(basename "$1").old-*"; }

# writer DIR LOG: until $TMP/stop appears, makes
# DIR/late-N and DIR/sub/f-N files and rewrites DIR/state by rename; each success is logged.
writer() {
  local d=$1 log=$2 i=0
  while [ ! -e "$TMP/stop" ]; do
    i=$((i + 1))
    { echo "$i" > "$d/late-$i"; } 2> /dev/null && echo "late-$i $i" >> "$log"
    if { echo "$i" > "$d/.state.tmp" && mv "$d/.state.tmp" "$d/state"; } 2> /dev/null; then echo "state $i" >> "$log"; fi
    # Into a subdirectory, made again where it is missing (a save moves it while it switches).
    { mkdir "$d/sub" 2> /dev/null; echo "$i" > "$d/sub/f-$i"; } 2> /dev/null && echo "sub/f-$i $i" >> "$log"
  done
}

one_case() { # one_case NAME [ENV...]: a run saving every step while the writer writes
  local name=$1; shift
  local d=$TMP/$name log=$TMP/$name.made
  rm -f "$TMP/stop"; : > "$log"
  "$MT" "${run[@]}" --steps 2 --save "$d" > /dev/null 2>&1
  echo "the user's" > "$d/keep.txt"; echo gone > "$d/gone.txt"
  : > "$d.jsonl"
  env "$@" "$MT" train --resume "$d" --steps 32 --save-every 1 --save "$d" > "$d.jsonl" 2> "$TMP/err" &
  local pid=$!
  while kill -0 $pid 2> /dev/null && [ "$(wc -l < "$d.jsonl")" -lt 2 ]; do sleep 0.01; done
  rm "$d/gone.txt"
  writer "$d" "$log" &
  local wpid=$!
  wait $pid
  local rc=$?
  touch "$TMP/stop"; wait $wpid
  check "$name: the run ends well ($(last_err))" test $rc -eq 0
  local n=0 lost=0 f v
  while read -r f v; do
    [ "$f" = state ] && continue
    n=$((n + 1))
    [ "$(cat "$d/$f" 2> /dev/null)" = "$v" ] || { lost=$((lost + 1)); [ $lost -le 3 ] && echo "$name: lost $f" >&2; }
  done < "$log"
  check "$name: the writer made files during the saves ($n)" test $n -ge 20
  check "$name: every file written during the saves is in DIR ($lost of $n lost)" test $lost -eq 0
  local want; want=$(awk '$1 == "state" { v = $2 } END { print v }' "$log")
  check "$name: a file replaced by rename holds its last version ($(cat "$d/state" 2> /dev/null), want $want)" \
    test "$(cat "$d/state" 2> /dev/null)" = "$want"
  check "$name: a file there from the start is kept" test "$(cat "$d/keep.txt" 2> /dev/null)" = "the user's"
  check "$name: a file removed during the run stays removed" test ! -e "$d/gone.txt"
  check "$name: DIR is the last checkpoint" test "$(jq .step "$d/checkpoint.json")" = 32
  check "$name: the files written into the subdirectory are all in it" test "$(ls "$d/sub" | wc -l)" = "$(grep -c '^sub/' "$log")"
  check "$name: no leftover temporary" test -z "$(leftovers "$d")"
}
one_case exchange
one_case fallback MT_FAULT_NO_EXCHANGE=1

# A save killed right after the switch leaves the previous checkpoint under its
# temporary name, holding what a writer put there late: the next save moves that
# into DIR, and removes the rest.
d=$TMP/killed
"$MT" "${run[@]}" --steps 2 --save "$d" > /dev/null 2>&1
(MT_FAULT_KILL_AT=exchanged "$MT" train --resume "$d" --steps 3 --save "$d"; true) > /dev/null 2>&1
old=$(leftovers "$d")
check "killed after the switch: the previous checkpoint is left ($old)" test -n "$old" -a "$(jq .step "$d/checkpoint.json")" = 3
[ -n "$old" ] && echo late > "$old/late.txt"
"$MT" train --resume "$d" --steps 4 --save "$d" > /dev/null 2> "$TMP/err"
rc=$?
check "  the next save ends well ($(last_err))" test $rc -eq 0
check "  and carries the late file into DIR" test "$(cat "$d/late.txt" 2> /dev/null)" = late
check "  no leftover" test -z "$(leftovers "$d")"
finish
