#!/usr/bin/env bash
# experiments/reproduce.sh leaves the checkout as it was: a run goes to its run directory
# (printed at the end), paths reach commands as arguments (a run directory named with an
# apostrophe and "$(...)" executes nothing), progress says "section k of N", and a failed
# section fails the run. Stub binaries (a megatrain that can only say its version) keep it
# fast: every sweep fails at once, which is part of what is checked.
. "$(dirname "$0")/lib.sh" python3 jq
git rev-parse --git-dir > /dev/null 2>&1 || { echo "skipped: not a git checkout"; exit 77; }
mkdir "$tmp/bin"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo %s; exit 0; }\necho "stub megatrain" >&2; exit 1\n' \
  "'{\"version\":\"0.0.0\",\"backends\":[\"cpu\"]}'" > "$tmp/bin/megatrain"
printf '#!/bin/sh\necho %s\n' "'{\"git_sha\":\"stub\"}'" > "$tmp/bin/mt-env"
chmod +x "$tmp/bin/megatrain" "$tmp/bin/mt-env"
before=$(git status --porcelain)
run="$tmp/it's '\$(touch $tmp/pwned)'"
plots=--no-plots
command -v gnuplot > /dev/null && plots=""  # the figures too where gnuplot is installed
MT_BIN=$tmp/bin bash experiments/reproduce.sh --cpu $plots --run-dir "$run" > "$tmp/out" 2> "$tmp/err"
rc=$?
[ "$rc" = 1 ] && pass "failed sections fail the run (exit 1)" || fail "exit $rc, want 1"
[ ! -e "$tmp/pwned" ] && pass "a run directory named with ' and \$(...) runs nothing" || fail "\$(...) in a path ran"
[ "$(cat "$run/results/env_$(hostname -s 2>/dev/null || echo host).json" 2>/dev/null)" = '{"git_sha":"stub"}' ] &&
  pass "mt-env's block written into the run directory" || fail "no env block in the run directory"
[ -s "$run/results/c2_cpu.jsonl" ] && [ -s "$run/results/claims.md" ] && [ -d "$run/plots/data" ] &&
  pass "the run's results, claims and figure data are in the run directory" || fail "run directory: $(ls "$run" "$run/results" | head)"
[ "$(git status --porcelain)" = "$before" ] && pass "the checkout is unchanged (git status)" ||
  { fail "the run changed the checkout"; git status --porcelain | head; }
grep -q '^== \[[0-9:]*\] section 1 of [0-9]*' "$tmp/err" && grep -q "this run is in $tmp/it's" "$tmp/err" &&
  pass "sections counted; the run directory printed at the end" || { fail "progress lines"; tail -5 "$tmp/err"; }
jq -e '.sections | length > 3' "$run/results/reproduce_cpu.json" > /dev/null &&
  pass "section times recorded for the next run's estimate" || fail "no sections in reproduce_cpu.json"
if [ -z "$plots" ]; then
  [ -s "$run/plots/out/batch.png" ] && [ -s "$run/plots/out/compare.png" ] && ! grep -q 'no valid points' "$tmp/err" &&
    ! grep -q '^sh: ' "$tmp/err" && [ -s "$run/plots/skipped.txt" ] &&
    grep -q 'gnuplot skipped [0-9]* empty series' "$tmp/err" &&
    pass "figures drawn in the run directory; the expected 'no valid points' warnings counted, not shown" ||
    { fail "figures"; grep -i 'gnuplot\|plot' "$tmp/err" | head -5; }
fi
exits 2 "--refresh with --run-dir" bash experiments/reproduce.sh --refresh --run-dir "$tmp/x"
finish
