#!/usr/bin/env bash
# ci/ab.sh and ci/ab_stats.py: the verdicts on made-up rounds (same, a slowdown, a run
# without a time, noise too wide to say), usage errors, and one real A/B on tiny settings:
# the build against itself passes; a B whose AdamW pass does 8x the work (a wrapper that
# sizes mt-microbench's host passes up, no hook in the engine) is caught and named.
. "$(dirname "$0")/lib.sh" jq python3 bins
[ -x "$MT_BIN/mt-microbench" ] || { echo "skipped: no $MT_BIN/mt-microbench"; exit 77; }
st=ci/ab_stats.py
# rows FILE BENCH A1,A2,... B1,B2,...: one row per round and side
rows() {
  python3 -c '
import json, sys
f, bench, a, b = sys.argv[1:]
with open(f, "a") as out:
    for i, (x, y) in enumerate(zip(a.split(","), b.split(",")), 1):
        for side, ms in (("a", x), ("b", y)):
            out.write(json.dumps({"round": i, "side": side, "bench": bench,
                                  "ms": None if ms == "null" else float(ms)}) + "\n")' "$@"
}
rows "$tmp/same.jsonl" host/adamw 10,11,10,12,10 10.5,10,11,11,10.2
rows "$tmp/same.jsonl" train/cpu/small 5,5,5,5,5 5,5,5,5,5
out=$(python3 $st "$tmp/same.jsonl"); rc=$?
[ "$rc" = 0 ] && grep -q -- '^host/adamw .* SAME$' <<< "$out" && pass "same: SAME, exit 0" ||
  { fail "same: exit $rc"; echo "$out"; }
cp "$tmp/same.jsonl" "$tmp/slow.jsonl"
rows "$tmp/slow.jsonl" host/grad_sumsq 20,21,20,22,20 23.5,24,23.4,25,23
out=$(python3 $st --suspects "$tmp/sus" "$tmp/slow.jsonl"); rc=$?
[ "$rc" = 1 ] && grep -q -- '^# ab: REGRESSION in host/grad_sumsq ' <<< "$out" &&
  [ "$(cat "$tmp/sus")" = host/grad_sumsq ] && pass "slowdown of 15%: REGRESSION named, exit 1" ||
  { fail "slowdown: exit $rc, suspects '$(cat "$tmp/sus")'"; echo "$out"; }
out=$(python3 $st --threshold 20 "$tmp/slow.jsonl"); rc=$?
[ "$rc" = 0 ] && grep -q -- '^host/grad_sumsq .* SAME$' <<< "$out" && pass "15% within a 20% threshold" ||
  { fail "threshold 20: exit $rc"; echo "$out"; }
rows "$tmp/wide.jsonl" train/cpu/mid 100,100,100,100,100 300,60,250,80,200
out=$(python3 $st "$tmp/wide.jsonl"); rc=$?
[ "$rc" = 0 ] && grep -q -- 'INCONCLUSIVE$' <<< "$out" && pass "noise wider than the change: INCONCLUSIVE" ||
  { fail "wide: exit $rc"; echo "$out"; }
rows "$tmp/failed.jsonl" host/adamw 10,10,10,10,10 10,10,null,10,10
out=$(python3 $st "$tmp/failed.jsonl"); rc=$?
[ "$rc" = 1 ] && grep -q -- 'FAILED-RUN' <<< "$out" && pass "a round without a time: FAILED-RUN, exit 1" ||
  { fail "failed run: exit $rc"; echo "$out"; }
echo '{"round": 1, "side": "c"}' > "$tmp/bad.jsonl"
exits 2 "ab_stats: a row without side a|b" python3 $st "$tmp/bad.jsonl"
exits 2 "ab.sh: one revision" bash ci/ab.sh HEAD
exits 2 "ab.sh: --rounds 3" bash ci/ab.sh --rounds 3 HEAD HEAD
exits 2 "ab.sh: not a commit" bash ci/ab.sh no-such-rev-xyz HEAD
exits 2 "ab.sh: unknown option" bash ci/ab.sh --bogus HEAD HEAD

# The real thing, tiny: host passes at 2^20 params, the small training run and the AdamW
# pass only, a wide threshold (CI's 2 cores are loaded; the point is the verdict's logic).
export MT_MB_HOST_N=1048576
mkdir "$tmp/slow_bin"
ln -s "$MT_BIN/megatrain" "$tmp/slow_bin/megatrain"
printf '#!/bin/sh\nMT_MB_HOST_N=%s exec "%s" "$@"\n' $((8 * MT_MB_HOST_N)) "$MT_BIN/mt-microbench" \
  > "$tmp/slow_bin/mt-microbench"
chmod +x "$tmp/slow_bin/mt-microbench"
args=(--bench '^(host/adamw|train/cpu/small)$' --threshold 50 --bin-a "$MT_BIN")
out=$(bash ci/ab.sh "${args[@]}" --bin-b "$MT_BIN" HEAD HEAD 2> "$tmp/err"); rc=$?
[ "$rc" = 0 ] && grep -q -- '^# ab: no regression' <<< "$out" && pass "the build against itself: exit 0" ||
  { fail "self: exit $rc"; echo "$out"; tail -3 "$tmp/err"; }
out=$(bash ci/ab.sh "${args[@]}" --bin-b "$tmp/slow_bin" HEAD slow 2> "$tmp/err"); rc=$?
if [ "$rc" = 1 ] && grep -q -- '^# ab: REGRESSION in host/adamw ' <<< "$out" &&
   ! grep -q -- 'REGRESSION in .*train/cpu/small' <<< "$out"; then
  pass "8x the AdamW work: caught, confirmed and named (exit 1)"
else
  fail "slow B: exit $rc"; echo "$out"; tail -3 "$tmp/err"
fi
grep -q 'round 5 of 5' "$tmp/err" && pass "progress on stderr" || fail "no progress lines"
finish
