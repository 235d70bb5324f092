#!/usr/bin/env bash
# Under `ulimit -u` (RLIMIT_NPROC, every thread of the user counted) a run that cannot
# start its threads says so in one line and exits 1 before it saves or loads anything:
# never libgomp's fatal exit from inside a step (which then hung on OpenBLAS's workers),
# never a staging directory left. A limit with room runs. RLIMIT_NPROC binds only a
# user without CAP_SYS_RESOURCE: as root the runs are made as nobody (setpriv), else skipped.
source "$(dirname "$0")/lib.sh"

as=()
if [ "$(id -u)" = 0 ]; then
  if ! command -v setpriv > /dev/null || ! id nobody > /dev/null 2>&1 || [ -n "$(ps -u nobody -o pid= 2> /dev/null)" ]; then
    echo "test_thread_limit: skipped (root without setpriv, or nobody has processes that would count)"; exit 0
  fi
  as=(setpriv --reuid nobody --regid "$(id -gn nobody)" --clear-groups)
fi
chmod 777 "$TMP"
cp -r "$FIX/tiny_llama" "$FIX/tokens.bin" "$TMP/" && chmod -R a+rwX "$TMP"
bin=$(readlink -f "$MT")
# limited N ARGS...: megatrain train ARGS as the test's user under ulimit -u N; rc, then the stderr in $TMP/err.
limited() {
  local n=$1; shift
  "${as[@]}" env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=3 bash -c 'ulimit -u "$1"; shift; cd "$1"; shift; exec "$@"' _ \
    "$n" "$TMP" timeout -s KILL 120 "$bin" train --model tiny_llama --data tokens.bin --batch 2 --seq-len 16 \
    --backend cpu "$@" > /dev/null 2> "$TMP/err"
}
errors() { grep -v "^step \|^megatrain: llama\|^megatrain: ready\|^done in\|^megatrain: saved" "$TMP/err"; }

limited 3 --steps 2 --save "$TMP/ck"
rc=$?
check "ulimit -u 3: exit 1, not a hang or a kill (rc $rc)" test $rc -eq 1
check "  one line naming the limit ($(errors | head -n 2))" \
  test "$(errors | wc -l)" = 1 -a -n "$(errors | grep '^megatrain: error: cannot start .*threads.*ulimit -u 3.*HINT')"
check "  nothing saved, no staging directory" test -z "$(find "$TMP" -maxdepth 1 -name '*ck*' ! -name '.ck.lock')"
# The engine's own threads fit, OpenMP's team does not: before, libgomp ended the process from a step.
# (main, the optimizer's, a drain, two teams of 2: 7 threads)
limited 6 --steps 2 --save "$TMP/ck"
rc=$?
check "ulimit -u 6 (OpenMP's teams do not fit): exit 1 (rc $rc)" test $rc -eq 1
check "  one line naming the limit ($(errors | head -n 2))" \
  test "$(errors | wc -l)" = 1 -a -n "$(errors | grep '^megatrain: error: cannot start .*ulimit -u 6')"
check "  nothing saved" test ! -e "$TMP/ck"
limited 10 --steps 2 --save "$TMP/ck"
rc=$?
check "ulimit -u 10: the run saves ($(errors | tail -n 1))" test $rc -eq 0 -a -f "$TMP/ck/checkpoint.json"
finish
