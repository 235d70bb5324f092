#!/usr/bin/env bash
# The sim's and the planner's numbers are pinned: every case in golden/cases.txt
# (each schedule on 7B/14B/120B-class shapes and five hardware profiles, the
# switches that change the schedule or the memory, the planner's JSON) gives
# exactly, digit for digit, the record in golden/sim_golden.jsonl. A refactor
# must not move them; a change meant to move them re-records the file with
# golden/make_sim_golden.sh and says why in its commit. The records were made on
# x86-64; the aarch64 build (make test-aarch64 sets MT_EMULATED) may round the
# last bit apart where its compiler fuses a multiply-add, so there every number
# must agree to 1e-12 relative and everything else exactly.
source "$(dirname "$0")/lib.sh"
if ! command -v jq > /dev/null; then echo "jq not installed: skipped"; exit 77; fi
GOLDEN_TMP=$TMP
G=megatrain/tests/golden
source $G/golden_lib.sh

golden_cases $G/cases.txt > "$TMP/cases"
check "cases.txt and sim_golden.jsonl list the same cases" \
  test "$(jq -r .args $G/sim_golden.jsonl)" = "$(cat "$TMP/cases")"
n=0
while read -r line; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  got=$(golden_run "$MT" $line)
  want=$(sed -n "${n}p" $G/sim_golden.jsonl)
  if [ "$got" = "$want" ]; then
    ok
  elif [ -n "${MT_EMULATED:-}" ] && jq -n -e --argjson a "$want" --argjson b "$got" \
    '([$a | paths(scalars)] == [$b | paths(scalars)]) and
     ([[$a | paths(scalars)][] as $p | ($a | getpath($p)) as $x | ($b | getpath($p)) as $y |
       if ($x | type) == "number" and ($y | type) == "number"
       then (($x - $y) | fabs) <= 1e-12 * ([($x | fabs), ($y | fabs)] | max) else $x == $y end] | all)' > /dev/null; then
    ok
  else
    bad "case $n ($line): differs from the golden record; first differences:"
    jq -n -c --argjson a "$want" --argjson b "$got" \
      '[$a | paths(scalars)] as $ps | [$ps[] as $p | select(($a | getpath($p)) != ($b | getpath($p))) | {path: $p, want: ($a | getpath($p)), got: ($b | getpath($p))}] | .[0:5][]' >&2 || true
  fi
done < "$TMP/cases"
check "every case ran ($n)" test "$n" -eq "$(wc -l < $G/sim_golden.jsonl)"
finish
