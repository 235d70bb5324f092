#!/usr/bin/env bash
# The memory check counts every limit the process lives under (core/mem_limits.h): ulimit -v
# (RLIMIT_AS) and -d (RLIMIT_DATA) less what is mapped and what threads will map, the cgroup's
# and the host's. Under ulimit -v a run either trains or stops with one error line naming the
# limit: never the spin at 100% CPU of OpenBLAS retrying a failed map, never a hang at exit
# (a timeout here is that failure), never a silent kill.
source "$(dirname "$0")/lib.sh"

tiny=(train --model $FIX/tiny_llama --data $FIX/tokens.bin --backend cpu --batch 2 --seq-len 16 --steps 2)
jq '.num_hidden_layers = 1 | .max_window_layers = 1' experiments/models/qwen2.5-3b.json > "$TMP/m.json"
big=(train --config "$TMP/m.json" --backend cpu --precision paper --batch 1 --seq-len 64 --steps 1)

# limited KIND KB ARGS...: megatrain ARGS under `ulimit -KIND KB` in a subshell, bounded by timeout.
limited() {
  local kind=$1 kb=$2; shift 2
  (ulimit -"$kind" "$kb" && exec timeout -k 5 60 "$MT" "$@") > "$TMP/out" 2> "$TMP/err"
}
# Lines of stderr that are not the run's own progress (nor the note that OpenBLAS ran with fewer threads).
errors() { grep -v "^step \|^megatrain: llama\|^megatrain: ready\|^done in\|OPENBLAS_NUM_THREADS=" "$TMP/err"; }

# Whether the last run stopped before megatrain's code ran: the dynamic loader's failure
# (exit 127), or under qemu-user (make test-aarch64) the emulator's own maps, its 128 MiB JIT
# buffer among them, which land differently each start (ASLR): there one limit lets it start
# in some tries and not in others, anywhere in a band some 60 MiB wide.
before_main() { grep -q "^qemu-[a-z0-9_]*: \|^mmap stack: \|error while loading shared libraries" "$TMP/err"; }

# The least ulimit -v under which the binary loads at all (`--version`): below it the dynamic
# loader fails before main (exit 127), out of megatrain's reach; the CUDA build's cuBLAS alone
# maps about 800 MiB. The sweep starts there. A timeout is the spin this test guards against.
lo=20000; hi=4000000
(ulimit -v $hi && exec "$MT" --version) > /dev/null 2>&1 || { echo "FAIL: megatrain --version under ulimit -v $hi"; exit 1; }
while [ $((hi - lo)) -gt 20000 ]; do
  mid=$(((lo + hi) / 2))
  ( (ulimit -v $mid && exec timeout -k 5 60 "$MT" --version); exit $? ) > /dev/null 2>&1 # a crash in the loader is reported by the outer subshell, into /dev/null
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && { echo "FAIL: megatrain --version spun under ulimit -v $mid"; exit 1; }
  if [ $rc -eq 0 ]; then hi=$mid; else lo=$mid; fi
done
echo "note: the binary loads from ulimit -v $hi KB"
# From too small for the threads' buffers to just enough: train, or one line naming the limit.
# A start that fails before main is tried again, up to 5 times, and the point left out if it
# never starts (said on stdout); the last point is far enough above to start every time.
for kb in $hi $((hi + 100000)) $((hi + 300000)) $((hi + 500000)) $((hi + 900000)); do
  for try in 1 2 3 4 5; do
    limited v $kb "${tiny[@]}"
    rc=$?
    [ $rc -ne 0 ] && before_main || break
  done
  if [ $rc -ne 0 ] && before_main; then
    echo "note: ulimit -v $kb: left out, 5 starts failed before main: $(head -1 "$TMP/err")"
    continue
  fi
  check "ulimit -v $kb: no spin or hang (exit $rc, not 124/137)" test $rc -ne 124 -a $rc -ne 137
  if [ $rc -eq 0 ]; then
    check "ulimit -v $kb: trained 2 steps" test "$(jq -s length "$TMP/out")" = 2
    check "ulimit -v $kb: no error line: $(errors | head -1)" test -z "$(errors)"
  else
    check "ulimit -v $kb: exit 1 (got $rc)" test $rc -eq 1
    check "ulimit -v $kb: one stderr line: $(head -2 "$TMP/err" | tr '\n' '|')" test "$(wc -l < "$TMP/err")" = 1
    check "ulimit -v $kb: the error names RLIMIT_AS: $(errors)" grep -q "error: .*RLIMIT_AS (ulimit -v)" "$TMP/err"
  fi
done
check "ulimit -v $kb: a small run trains" test $rc -eq 0

# A 4.3 GiB state under a 2 GiB address space: refused before anything is allocated, naming the
# limit and its figures (the host's MemAvailable would have let it start, and the kernel fail it later).
for kind in v d; do
  name=RLIMIT_AS; [ $kind = d ] && name=RLIMIT_DATA
  limited $kind 2000000 "${big[@]}"
  rc=$?
  check "ulimit -$kind 2 GB, 4.3 GiB state: exit 1 (got $rc)" test $rc -eq 1
  check "ulimit -$kind: one stderr line" test "$(wc -l < "$TMP/err")" = 1
  check "ulimit -$kind: names $name and the figures: $(errors)" \
    grep -q "needs [0-9.]* GiB.*but [0-9.]* [KMG]iB is available ($name (ulimit -$kind) 1.91 GiB, of which [0-9.]* [MG]iB is mapped" "$TMP/err"
  check "ulimit -$kind: nothing was allocated" grep -q "nothing was allocated" "$TMP/err"
  check "ulimit -$kind: nothing on stdout" test ! -s "$TMP/out"
done
# MT_HOST_MEM_LIMIT and the host are named the same way.
MT_HOST_MEM_LIMIT=1000000 "$MT" "${big[@]}" > /dev/null 2> "$TMP/err"
check "MT_HOST_MEM_LIMIT: named as the limit: $(cat "$TMP/err")" grep -q "is available (MT_HOST_MEM_LIMIT 976.6 KiB)" "$TMP/err"
finish
