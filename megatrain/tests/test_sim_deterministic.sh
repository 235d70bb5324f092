#!/usr/bin/env bash
# The sim's output is a function of its inputs only: the same configuration gives
# the same records and the same ops trace (--trace's .ops.json), byte for byte,
# whatever the number of CPUs it runs on, the OpenMP thread count or the OS's
# scheduling. The host threads (drain, optimizer) race the main thread in real
# time; the copies they share the host memory with are priced once the lanes have
# caught up in virtual time (core/vclock.h), and the trace is written in time order.
# Configurations where AdamW overlaps the weight stream (paper, mixed, the update in
# parts) on the H200 and the GH200 profiles, with and without the speculative step.
source "$(dirname "$0")/lib.sh"
if ! command -v jq > /dev/null; then echo "jq not installed: skipped"; exit 77; fi

run() { # run TAG PREFIX... -- ARGS...: the records (wall-clock fields dropped) and the ops trace, by their sums
  local tag=$1; shift
  local pre=()
  while [ "$1" != "--" ]; do pre+=("$1"); shift; done
  shift
  "${pre[@]}" "$MT" train --backend sim --steps 3 --trace "$TMP/$tag.json" "$@" 2> "$TMP/$tag.err" |
    jq -c 'del(.drain_wait_ms, .peak_rss_bytes)' > "$TMP/$tag.out" || { cat "$TMP/$tag.err" >&2; return 1; }
  cat "$TMP/$tag.out" "$TMP/$tag.json.ops.json" | md5sum | cut -d' ' -f1
}

ways=("env" "env OMP_NUM_THREADS=1" "env OMP_NUM_THREADS=16" "nice -n 10")
if taskset -c 0 true 2> /dev/null; then ways+=("taskset -c 0"); fi # one CPU: the threads take turns
n=0
for args in \
  "--config experiments/models/qwen2.5-7b.json --hardware h200-128g --precision paper --batch 8 --seq-len 1024" \
  "--config experiments/models/qwen2.5-7b.json --hardware h200-128g --precision mixed --batch 4 --seq-len 1024 --update-parts 4" \
  "--config experiments/models/qwen2.5-14b.json --hardware gh200-480g --precision paper --batch 16 --seq-len 1024 --speculative-step false"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  want=$(run "c$n-first" env -- $args)
  check "case $n ran ($args)" test -n "$want" -a -s "$TMP/c$n-first.json.ops.json"
  for rep in 1 2; do
    for w in "${ways[@]}"; do
      # shellcheck disable=SC2086
      got=$(run "c$n" $w -- $args)
      if [ "$got" = "$want" ]; then ok; else
        bad "case $n, run $rep under '$w': records or ops trace differ from the first run"
        diff <(head -c 2000 "$TMP/c$n-first.out") <(head -c 2000 "$TMP/c$n.out") >&2 || true
      fi
    done
  done
done
finish
