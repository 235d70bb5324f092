#!/usr/bin/env bash
# `gpu_campaign.sh next` (issue 23): in one call, the highest-priority parts not yet filed for
# this GPU that fit the budget it states, at most 2 (each packs 4 files; 8 come back). Planned
# here with --next-plan against a made-up results/campaign/ (a filed manifest per part; a dry
# run's does not count).
. "$(dirname "$0")/lib.sh"
[ -x "$MT_BIN/megatrain" ] || { echo "skipped: no $MT_BIN/megatrain"; exit 77; }
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
man() { # man TAG PART DRY: a filed manifest
  printf '{"schema": "megatrain.gpu_campaign/1", "part": "%s", "tag": "%s", "dry_run": %s}\n' "$2" "$1-$2" "$3" \
    > "$tmp/c/$1-$2-20261126T000000Z-manifest.json"
}
plan() { bash ci/gpu_campaign.sh --next-plan "$1" --budget "$2" --campaign-dir "$tmp/c" 2>&1; }
mkdir -p "$tmp/c"
man h200 A false; man h200 B false; man h200 C true   # C only as a dry run: not filed
out=$(plan "NVIDIA H200" 900)
check "H200 with A and B filed: C first (a dry run's manifest does not count): $out" \
  'printf "%s" "$out" | grep -q "filed already: A, B; within 900 s: C (~"'
check "at most 2 parts in one call: $out" '[ "$(printf "%s" "$out" | grep -o "(~[0-9]* s)" | wc -l)" -le 2 ]'
out=$(plan "NVIDIA H100 80GB HBM3" 5000)
check "nothing filed for the H100: A and B, and no third however large the budget: $out" \
  'printf "%s" "$out" | grep -Eq "filed already: none; within 5000 s: A \(~[0-9]+ s\), B \(~[0-9]+ s\)$"'
out=$(plan "NVIDIA H100 80GB HBM3" 60)
check "a budget nothing fits: said: $out" 'printf "%s" "$out" | grep -q "within 60 s: nothing fits"'
for p in A B C D E F G; do man h100 $p false; done
out=$(plan "NVIDIA H100 80GB HBM3" 900)
check "every part filed: nothing to run: $out" 'printf "%s" "$out" | grep -q "nothing fits"'
bash ci/gpu_campaign.sh --next-plan > /dev/null 2>&1
check "--next-plan without a GPU name: exit 2" '[ $? = 2 ]'
# The run itself, as CPU dry runs: each chosen part packed in its own folder, 4 files each.
bash ci/gpu_campaign.sh --dry-run next --out "$tmp/n" --budget 900 > "$tmp/n.log" 2>&1
rc=$?
check "next --dry-run: exit $rc, parts A and B each packed in OUT/PART" \
  '[ $rc = 0 ] && [ -f "$tmp/n/A/A-manifest.json" ] && [ -f "$tmp/n/B/B-manifest.json" ] && [ ! -e "$tmp/n/C" ]'
check "at most 8 files come back: $(find "$tmp/n" -type f | wc -l)" '[ "$(find "$tmp/n" -type f | wc -l)" -le 8 ]'
bash ci/gpu_campaign.sh --file "$tmp/n" > "$tmp/f.log" 2>&1
check "--file finds a part per folder (here refusing both dry runs)" \
  '[ "$(grep -c "a dry run (tiny CPU rows): not filed" "$tmp/f.log")" = 2 ]'
finish
