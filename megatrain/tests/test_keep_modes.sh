#!/usr/bin/env bash
# A file or directory megatrain replaces keeps the mode its user gave it (issue 39,
# class 2). A checkpoint made private (700 on DIR, 600 on its files) stays private
# through saves, a new shard taking its siblings' mode, and is private while a
# save is written (the staging directory); a group-readable one keeps 750/640; the
# user's own files keep theirs (and, as root, a replaced file its owner). --trace (and sim's TRACE.ops.json), --dump-grads
# and --log keep theirs. An output that did not exist gets the umask's mode.
source "$(dirname "$0")/lib.sh"

run=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu)
last_err() { tail -n 1 "$TMP/err" | tr '\r' '\n' | tail -n 1; }
mode() { stat -c %a "$1"; }
# modes_are DIR MODE: every checkpoint file in DIR (all but notes.txt) has MODE; prints the others.
modes_are() {
  local bad
  bad=$(find "$1" -mindepth 1 -maxdepth 1 ! -name notes.txt ! -perm "$2" -printf '%f %m\n')
  [ -z "$bad" ] || { echo "not $2: $bad" >&2; return 1; }
}

d=$TMP/private
"$MT" "${run[@]}" --steps 2 --save "$d" > /dev/null 2>&1
chmod 700 "$d"; chmod 600 "$d"/*
echo "mine" > "$d/notes.txt"; chmod 640 "$d/notes.txt"
"$MT" train --resume "$d" --steps 4 --save-every 1 --save "$d" > /dev/null 2> "$TMP/err"
rc=$?
check "a private checkpoint resumes and saves ($(last_err))" test $rc -eq 0 -a "$(jq .step "$d/checkpoint.json")" = 4
check "  DIR stays 700 ($(mode "$d"))" test "$(mode "$d")" = 700
check "  its files stay 600" modes_are "$d" 600
check "  the user's file keeps 640 ($(mode "$d/notes.txt"))" test "$(mode "$d/notes.txt")" = 640
# Resharded: the shards are new names, and take the mode the single files had.
"$MT" train --resume "$d" --steps 5 --shard-size 100000 --save "$d" > /dev/null 2> "$TMP/err"
check "resharded ($(last_err))" test -e "$d/model.safetensors.index.json"
check "  new shards and indexes are 600 too" modes_are "$d" 600
check "  DIR stays 700" test "$(mode "$d")" = 700
# While a save is written: killed at the point where it is staged, whole, before the switch.
(MT_FAULT_KILL_AT=staged "$MT" train --resume "$d" --steps 6 --save "$d"; true) > /dev/null 2>&1
staged=$(find "$TMP" -maxdepth 1 -name '.private.tmp-*' | head -n 1)
check "killed at the staged point: the staged save is left" test -n "$staged"
if [ -n "$staged" ]; then
  check "  the staging directory is 700 ($(mode "$staged"))" test "$(mode "$staged")" = 700
  check "  its checkpoint files are 600" modes_are "$staged" 600
fi
"$MT" train --resume "$d" --steps 6 --save "$d" > /dev/null 2> "$TMP/err"
check "the next save tidies it and keeps the modes ($(last_err))" test "$(mode "$d")" = 700
check "  files 600" modes_are "$d" 600

g=$TMP/group
"$MT" "${run[@]}" --steps 1 --save "$g" > /dev/null 2>&1
chmod 750 "$g"; chmod 640 "$g"/*
"$MT" train --resume "$g" --steps 2 --save "$g" > /dev/null 2> "$TMP/err"
check "a group-readable checkpoint keeps 750 ($(mode "$g"))" test "$(mode "$g")" = 750
check "  and 640" modes_are "$g" 640

# Outputs the run replaces.
for f in trace.json grads.safetensors log.jsonl; do echo old > "$TMP/$f"; done
chmod 600 "$TMP/trace.json"; chmod 640 "$TMP/grads.safetensors"; chmod 604 "$TMP/log.jsonl"
"$MT" "${run[@]}" --steps 2 --trace "$TMP/trace.json" --dump-grads "$TMP/grads.safetensors" --log "$TMP/log.jsonl" \
  > /dev/null 2> "$TMP/err"
rc=$?
check "outputs written ($(last_err))" test $rc -eq 0 -a "$(head -c 1 "$TMP/trace.json")" = "{"
check "  --trace keeps 600 ($(mode "$TMP/trace.json"))" test "$(mode "$TMP/trace.json")" = 600
check "  --dump-grads keeps 640 ($(mode "$TMP/grads.safetensors"))" test "$(mode "$TMP/grads.safetensors")" = 640
check "  --log keeps 604 ($(mode "$TMP/log.jsonl"))" test "$(mode "$TMP/log.jsonl")" = 604
# Through a symlink: the file it names keeps its mode.
ln -s trace.json "$TMP/trace-link.json"
"$MT" "${run[@]}" --steps 1 --trace "$TMP/trace-link.json" > /dev/null 2>&1
check "  --trace through a link: the file keeps 600" test "$(mode "$TMP/trace.json")" = 600 -a -L "$TMP/trace-link.json"
echo old > "$TMP/sim.json"; echo old > "$TMP/sim.json.ops.json"
chmod 600 "$TMP/sim.json" "$TMP/sim.json.ops.json"
"$MT" train --config $FIX/tiny_llama/config.json --data synthetic --batch 2 --seq-len 16 --steps 1 --backend sim \
  --hardware h100-128g --trace "$TMP/sim.json" > /dev/null 2> "$TMP/err"
rc=$?
check "--backend sim --trace ($(last_err))" test $rc -eq 0
check "  the trace and its .ops.json keep 600" test "$(mode "$TMP/sim.json")/$(mode "$TMP/sim.json.ops.json")" = 600/600
# As root, a replaced file keeps its owner too (a checkpoint, a trace made for another user).
if [ "$(id -u)" = 0 ] && id nobody > /dev/null 2>&1; then
  chown nobody "$TMP/trace.json" "$d" "$d"/*
  "$MT" "${run[@]}" --steps 1 --trace "$TMP/trace.json" > /dev/null 2>&1
  "$MT" train --resume "$d" --steps 7 --save "$d" > /dev/null 2> "$TMP/err"
  check "as root: the replaced trace and checkpoint keep their owner ($(last_err))" \
    test "$(stat -c %U "$TMP/trace.json") $(stat -c %U "$d") $(stat -c %U "$d/model.safetensors")" = "nobody nobody nobody"
else
  echo "test_keep_modes: the owner case skipped (not root)"
fi
# New outputs: the umask decides.
(umask 077 && "$MT" "${run[@]}" --steps 1 --trace "$TMP/new.json" --dump-grads "$TMP/new.st" > /dev/null 2>&1)
check "new outputs under umask 077 are 600" test "$(mode "$TMP/new.json")/$(mode "$TMP/new.st")" = 600/600
(umask 022 && "$MT" "${run[@]}" --steps 1 --save "$TMP/fresh" > /dev/null 2>&1)
check "a first save under umask 022 is 755/644" test "$(mode "$TMP/fresh")" = 755
check "  files 644" modes_are "$TMP/fresh" 644
finish
