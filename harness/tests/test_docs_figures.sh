#!/usr/bin/env bash
# README.md and REPRODUCE.md quote figures only through their generated blocks, and each
# block is what harness/sweep/docs.py renders from the committed results/ (the measured
# table, the claims table, the C2 batch ratios, the reproduce time, the time per sweep).
# A stale figure fails with a diff; `python3 -m harness.sweep.docs --write` fixes it.
. "$(dirname "$0")/lib.sh" python3
out=$(python3 -m harness.sweep.docs --check 2>&1); rc=$?
echo "$out" | head -60
[ "$rc" = 0 ] || { echo "FAIL: a generated block differs from results/"; exit 1; }
# the blocks are there (a document without them would check nothing)
for b in "README.md measured" "README.md claims" "README.md c2-batch" "REPRODUCE.md status" "REPRODUCE.md claims" \
         "REPRODUCE.md sweep-times"; do
  set -- $b
  grep -q "^ *<!-- generated:$2 (harness/sweep/docs.py" "$1" || { echo "FAIL: $1 has no generated block '$2'"; exit 1; }
done
# README's claims block is claims.py's whole table: a failed configuration's row too (issue 38)
python3 -m harness.sweep.claims --markdown "$tmp/claims.md" > /dev/null 2>&1 || { echo "FAIL: claims.py"; exit 1; }
want=$(grep -c '^| ' "$tmp/claims.md")
got=$(sed -n '/generated:claims/,/end generated:claims/p' README.md | grep -c '^| ')
[ "$want" = "$got" ] || { echo "FAIL: README's claims block has $got table lines, claims.py $want"; exit 1; }
grep -q '^tally: ' "$tmp/claims.md" || { echo "FAIL: the claims table ends without a tally"; exit 1; }
echo "all checks passed"
