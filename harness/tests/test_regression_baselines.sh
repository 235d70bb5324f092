#!/usr/bin/env bash
# The regression gate on every CI run: re-runs every sweep marked "baseline" (the
# deterministic projections: sim backend and planner) and compares the rows with the
# committed results/baselines/sim.jsonl through ci/check_regression.sh, two-sided (a
# projection that moves either way by more than 0.5% fails, and so does a change in fits
# or planned memory). Every row must have its baseline and every baseline its row. When a
# change to the engine, sim or planner moves projections on purpose, re-record:
#   make reproduce  (or run the baseline sweeps)  &&  python3 -m harness.sweep.baselines sim
. "$(dirname "$0")/lib.sh" jq python3 bins
"$MT_BIN/megatrain" --version | grep -q '"sim"' || { echo "FAIL: this megatrain has no sim backend"; exit 1; }
base=results/baselines/sim.jsonl
[ -s "$base" ] || { echo "FAIL: $base missing; HINT: python3 -m harness.sweep.baselines sim"; exit 1; }

mapfile -t files < <(python3 -m harness.sweep.sweeps --list baseline | cut -f1)
[ ${#files[@]} -ge 1 ] || { echo "FAIL: no sweep is marked baseline"; exit 1; }
python3 -m harness.sweep.run --out-dir "$tmp/r" "${files[@]}" 2> "$tmp/err" || { fail "baseline sweeps exit $?"; tail -5 "$tmp/err"; }
cat "$tmp"/r/*.jsonl > "$tmp/all.jsonl"
out=$(bash ci/check_regression.sh --two-sided --warn-pct 0.1 --fail-pct 0.5 "$tmp/all.jsonl" "$base"); rc=$?
summary=$(printf '%s\n' "$out" | grep '^# summary')
echo "$summary"
if [ "$rc" != 0 ] || ! printf '%s' "$summary" | grep -q 'warn 0, fail 0, no baseline 0, .*baselines unmatched 0$'; then
  fail "projections differ from $base (exit $rc); HINT: if the change is meant, re-record: python3 -m harness.sweep.baselines sim"
  printf '%s\n' "$out" | grep -Ev '^OK|^NODATA' | head -30
else
  echo "ok   $(printf '%s\n' "$out" | grep -c '^OK') rows match their baselines"
fi

# The gate can fail: one row 1% faster, one whose plan no longer fits.
jq -c 'if .experiment == "c2_gh200" and .system == "megatrain" and .batch == 16
       then .step_ms.median *= 0.99 else . end' "$tmp/all.jsonl" > "$tmp/faster.jsonl"
bash ci/check_regression.sh --two-sided --warn-pct 0.1 --fail-pct 0.5 "$tmp/faster.jsonl" "$base" > "$tmp/o1"
[ $? = 1 ] && grep -q '^FAIL .*c2_gh200 .* megatrain .*-1%' "$tmp/o1" && echo "ok   a 1% faster projection fails" ||
  { fail "a 1% faster projection was not caught"; grep -v '^OK' "$tmp/o1" | head; }
jq -c 'if .experiment == "c1_120b" and .batch == 4 then .fits = false else . end' "$tmp/all.jsonl" > "$tmp/unfit.jsonl"
bash ci/check_regression.sh --two-sided --warn-pct 0.1 --fail-pct 0.5 "$tmp/unfit.jsonl" "$base" > "$tmp/o2"
[ $? = 1 ] && grep -q '^FAIL .*c1_120b' "$tmp/o2" && echo "ok   a change in fits fails" || fail "a change in fits was not caught"

finish
