#!/usr/bin/env bash
# A signal to any one rank of an `mpirun -np 2` run stops every rank at the same step
# boundary (the ranks agree on the stop at each boundary, cli/cmd_train.c): host 0 saves that
# step once, every process says so and exits 130, mpirun too; the save resumes. Before, the
# signalled rank waited in MPI's shutdown, the other spun in a collective, nothing was saved.
# Skipped (exit 77) where mpirun is missing or megatrain was built without MPI.
source "$(dirname "$0")/lib.sh"

need_mpi test_multihost_signal

# rank_pid MPIRUN_PID RANK: the pid of that rank among mpirun's descendants (its environment says its rank).
rank_pid() {
  local p
  for p in $(pgrep -P "$1") $(for c in $(pgrep -P "$1"); do pgrep -P "$c"; done); do
    tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}

# alive PID: running (a zombie has exited: where no init reaps orphans, it stays listed).
alive() { [ -e "/proc/$1" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2> /dev/null)" != Z ]; }

for case in 1:TERM 0:INT; do
  target=${case%:*} sig=${case#*:}
  {
    d=$TMP/r${target}_$sig
    : > "$d.jsonl"
    mpirun -np 2 "$MT" train --config $DATA/tiny5_llama.json --seed 7 --batch 4 --seq-len 32 --data $FIX/tokens.bin \
      --backend cpu --steps 1000000 --save "$d" > "$d.jsonl" 2> "$d.err" &
    mpid=$!
    while kill -0 $mpid 2> /dev/null && [ "$(wc -l < "$d.jsonl")" -lt 2 ]; do sleep 0.05; done
    pids=$(for r in 0 1; do rank_pid $mpid $r; done)
    pid=$(rank_pid $mpid $target)
    check "rank $target's pid found (ranks: $(echo $pids))" test -n "$pid"
    [ -n "$pid" ] && kill -$sig "$pid"
    # Bounded: every process gone within 60 s (a rank left in a collective or in MPI's shutdown never is).
    for _ in $(seq 600); do alive $mpid || break; sleep 0.1; done
    left=$(for p in $pids; do alive "$p" && echo "$p"; done)
    check "SIG$sig to rank $target: every process gone within 60 s (left: $left $(ps -o pid=,stat=,args= -p "$(echo ${left:-1} | tr " " ,)"))" \
      test -z "$left"
    if kill -0 $mpid 2> /dev/null; then kill -KILL $pids $mpid 2> /dev/null; fi
    wait $mpid
    rc=$?
    check "SIG$sig to rank $target: mpirun exits 130 (got $rc)" test $rc -eq 130
    n=$(grep -c "interrupted by SIG$sig" "$d.err")
    check "SIG$sig to rank $target: both ranks say it ($n): $(grep interrupted "$d.err" | head -2 | tr '\n' '|')" test "$n" = 2
    check "SIG$sig to rank $target: never 'no --save'" test "$(grep -c "no --save" "$d.err")" = 0
    steps=$(sed -n 's/.*interrupted by .* after step \([0-9]*\).*/\1/p' "$d.err" | sort -u)
    check "SIG$sig to rank $target: both ranks stopped after the same step ($(echo $steps))" test "$(echo "$steps" | wc -l)" = 1
    check "SIG$sig to rank $target: host 0 saved to --save" grep -q "after step $steps; saved to $d\$" "$d.err"
    check "SIG$sig to rank $target: the other rank says host 0 saves it" grep -q "after step $steps; host 0 saves it to $d\$" "$d.err"
    k=$(jq .step "$d/checkpoint.json" 2> /dev/null)
    check "SIG$sig to rank $target: the checkpoint is the stopped step ($k = $steps)" test "$k" = "$steps"
    check "SIG$sig to rank $target: and the last step reported" test "$k" = "$(tail -n 1 "$d.jsonl" | jq .step)"
    check "SIG$sig to rank $target: no staging directory left" test -z "$(ls -A "$(dirname "$d")" | grep -E "^\.$(basename "$d")\.(tmp|old)-")"
    "$MT" train --resume "$d" --steps $((k + 2)) --save "$d" > "$d.res.jsonl" 2> "$TMP/err"
    rc=$?
    check "SIG$sig to rank $target: the save resumes ($(tail -1 "$TMP/err"))" test $rc -eq 0 -a "$(jq -s length "$d.res.jsonl")" = 2
  }
done
finish
