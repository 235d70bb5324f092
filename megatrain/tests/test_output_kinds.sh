#!/usr/bin/env bash
# Nothing an output option points at is destroyed (issue 29, class 1). Each
# output (--log, --trace, --dump-grads, --save) onto each kind of path: a
# symlink is followed (the file or directory it names gets the output, the link
# stays a link, a dangling one gets its target made); a character device or FIFO
# is written through in place by the text streams --log and --trace, and
# refused before training by --dump-grads and --save; a block device, a socket
# or a directory is refused by every file output. Device nodes need root
# (mknod): those cases are skipped with a line where it is not permitted.
source "$(dirname "$0")/lib.sh"

run=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --batch 2 --seq-len 16 --lr 2e-3 --backend cpu --steps 2)
# What --OPTION takes for PATH: the CLI word list.
args_for() { # args_for OPTION PATH
  case $1 in --save) echo "--save $2" ;; *) echo "$1 $2" ;; esac
}
kind() { stat -c %F "$1" 2>/dev/null || echo missing; }

# --- symlinks: followed, the link kept, its target replaced (or made).
for opt in --log --trace --dump-grads; do
  d=$TMP/link${opt}; mkdir -p "$d"
  echo "the user's file" > "$d/target"
  ln -s target "$d/out"
  "$MT" "${run[@]}" $opt "$d/out" > /dev/null 2> "$TMP/err"
  check "$opt onto a symlink: exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
  check "$opt onto a symlink: the link stays a link" test -L "$d/out" -a "$(readlink "$d/out")" = target
  check "$opt onto a symlink: its target holds the output" test -s "$d/target" -a "$(head -c 15 "$d/target" | tr -d '\0')" != "the user's file"
  check "$opt onto a symlink: no temporary left" test "$(ls -A "$d" | sort | tr '\n' ' ')" = "out target "
  ln -s made "$d/dangling"
  "$MT" "${run[@]}" $opt "$d/dangling" > /dev/null 2> "$TMP/err"
  check "$opt onto a dangling symlink: exit 0, the link kept, its target made" test $? -eq 0 -a -L "$d/dangling" -a -s "$d/made"
done
d=$TMP/linksave; mkdir -p "$d/real"
ln -s real "$d/ck"
"$MT" "${run[@]}" --save "$d/ck" > /dev/null 2> "$TMP/err"
check "--save onto a symlink to a directory: exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
check "--save onto a symlink: the link stays a link" test -L "$d/ck" -a "$(readlink "$d/ck")" = real
check "--save onto a symlink: the directory it names holds the checkpoint" test -s "$d/real/checkpoint.json"

# --- FIFOs: --log and --trace written through to the reader; the others refused.
for opt in --log --trace; do
  f=$TMP/fifo$opt; mkfifo "$f"
  timeout 20 cat "$f" > "$f.read" & # bounded: a FIFO replaced by a file leaves its reader waiting
  reader=$!
  "$MT" "${run[@]}" $opt "$f" > /dev/null 2> "$TMP/err"
  rc=$?
  wait $reader
  check "$opt onto a FIFO: exit 0 ($(tail -n 1 "$TMP/err"))" test $rc -eq 0
  check "$opt onto a FIFO: still a FIFO" test -p "$f"
  check "$opt onto a FIFO: its reader got the output" test -s "$f.read"
done
check "--log through a FIFO: the step lines" test "$(jq -r .step "$TMP/fifo--log.read" | tr '\n' ' ')" = "1 2 "
check "--trace through a FIFO: the trace JSON" jq -e '.traceEvents | length > 0' "$TMP/fifo--trace.read" > /dev/null
for opt in --dump-grads --save; do
  f=$TMP/fifo$opt; mkfifo "$f"
  "$MT" "${run[@]}" $(args_for $opt "$f") > "$TMP/out" 2> "$TMP/err"
  rc=$?
  check "$opt onto a FIFO: refused before training, exit 1 ($(tail -n 1 "$TMP/err"))" test $rc -eq 1 -a ! -s "$TMP/out"
  check "$opt onto a FIFO: the error names the option and the kind" grep -q -- "$opt $f: .*FIFO\|$opt $f: exists and is not a directory" "$TMP/err"
  check "$opt onto a FIFO: still a FIFO" test -p "$f"
done

# --- a socket and a directory: refused by every file output.
python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$TMP/sock"
mkdir "$TMP/adir"
for opt in --log --trace --dump-grads --save; do
  for p in "$TMP/sock" "$TMP/adir"; do
    [ "$opt" = --save ] && [ "$p" = "$TMP/adir" ] && continue # a directory is what --save takes
    "$MT" "${run[@]}" $(args_for $opt "$p") > "$TMP/out" 2> "$TMP/err"
    rc=$?
    check "$opt onto $(kind "$p"): refused before training ($(tail -n 1 "$TMP/err"))" test $rc -eq 1 -a ! -s "$TMP/out"
  done
done
check "the socket is still a socket" test -S "$TMP/sock"
check "the directory is still empty" test -z "$(ls -A "$TMP/adir")"

# --- device nodes (root: mknod). /dev/null's and /dev/full's numbers, and a
# block device's, made inside TMP so that a regression replaces nothing of the machine's.
if ! mknod "$TMP/null" c 1 3 2> /dev/null; then
  echo "test_output_kinds: device cases skipped: mknod is not permitted here (not root)"
  finish
fi
mknod "$TMP/full" c 1 7
mknod "$TMP/blk" b 7 255
devs() { stat -c '%F %t:%T' "$TMP/null" "$TMP/full" "$TMP/blk" | tr '\n' ' '; }
want=$(devs)
for opt in --log --trace; do
  "$MT" "${run[@]}" $opt "$TMP/null" > "$TMP/out" 2> "$TMP/err"
  check "$opt onto a character device (null): written through, exit 0 ($(tail -n 1 "$TMP/err"))" test $? -eq 0
  check "$opt onto a character device: still the device" test "$(devs)" = "$want"
done
for opt in --dump-grads --save; do
  "$MT" "${run[@]}" $(args_for $opt "$TMP/null") > "$TMP/out" 2> "$TMP/err"
  rc=$?
  check "$opt onto a character device: refused before training, exit 1 ($(tail -n 1 "$TMP/err"))" test $rc -eq 1 -a ! -s "$TMP/out"
  check "$opt onto a character device: still the device" test "$(devs)" = "$want"
done
for opt in --log --trace --dump-grads --save; do
  "$MT" "${run[@]}" $(args_for $opt "$TMP/blk") > "$TMP/out" 2> "$TMP/err"
  rc=$?
  check "$opt onto a block device: refused before training, exit 1 ($(tail -n 1 "$TMP/err"))" test $rc -eq 1 -a ! -s "$TMP/out"
  check "$opt onto a block device: still the device" test "$(devs)" = "$want"
done
# Through a symlink to a device: the device is what the link names.
ln -s null "$TMP/tonull"
"$MT" "${run[@]}" --trace "$TMP/tonull" > /dev/null 2> "$TMP/err"
check "--trace onto a symlink to a character device: exit 0, both kept" test $? -eq 0 -a -L "$TMP/tonull" -a "$(devs)" = "$want"
"$MT" "${run[@]}" --dump-grads "$TMP/tonull" > /dev/null 2> "$TMP/err"
check "--dump-grads onto a symlink to a character device: refused" test $? -eq 1 -a -L "$TMP/tonull" -a "$(devs)" = "$want"
# With --backend sim, --trace's op timeline would go beside a device (TRACE.ops.json): refused.
"$MT" train --config $FIX/tiny_llama/config.json --data synthetic --batch 2 --seq-len 16 --steps 1 --backend sim \
  --hardware h100-128g --trace "$TMP/null" > "$TMP/out" 2> "$TMP/err"
rc=$?
check "--trace onto a device with --backend sim: refused ($(tail -n 1 "$TMP/err"))" test $rc -ne 0 -a ! -e "$TMP/null.ops.json"
check "  and the device kept" test "$(devs)" = "$want"
finish
