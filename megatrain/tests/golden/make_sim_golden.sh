#!/usr/bin/env bash
# Records megatrain/tests/golden/sim_golden.jsonl from the cases in cases.txt.
# Run from the repository root after a change that is meant to move sim or plan
# numbers (and say so in the commit): bash megatrain/tests/golden/make_sim_golden.sh [build/bin]
set -eu
here=megatrain/tests/golden
bin=${1:-build/bin}/megatrain
GOLDEN_TMP=$(mktemp -d)
trap 'rm -rf "$GOLDEN_TMP"' EXIT
source $here/golden_lib.sh
golden_cases $here/cases.txt | while read -r line; do
  # shellcheck disable=SC2086
  golden_run "$bin" $line
done > $here/sim_golden.jsonl.tmp
mv $here/sim_golden.jsonl.tmp $here/sim_golden.jsonl
echo "$(wc -l < $here/sim_golden.jsonl) cases recorded in $here/sim_golden.jsonl" >&2
