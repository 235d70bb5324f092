#!/usr/bin/env bash
# `megatrain plan --compare A,B,...`: one column per profile, in the order given; each
# column is that profile's own plan (`plan --hardware A` alone, byte for byte, plus
# "compare"); each carries the sim's error band from the validation file
# ($MT_SIM_VALIDATION: the fixture here); bad lists and contradicting options are
# one stderr line and exit 2, with nothing on stdout.
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { echo "test_plan_compare: jq not found, skipped"; exit 77; }

export MT_SIM_VALIDATION=$DATA/sim_validation.json
M=experiments/models
q14=(--config $M/qwen2.5-14b.json --batch 16 --seq-len 1024 --precision paper)
profiles=(h200-128g h200-1.5t gh200-480g b200-2t h100-128g)
list=$(IFS=,; echo "${profiles[*]}")

"$MT" plan "${q14[@]}" --compare "$list" > "$TMP/rows.jsonl" 2> "$TMP/table"
check "compare exits 0: $(tail -n 1 "$TMP/table")" test $? -eq 0

# --- one column per profile, in order: the JSON lines and the table's header row
check "one JSON line per profile" test "$(jq -s length "$TMP/rows.jsonl")" -eq ${#profiles[@]}
check "rows in the order given" test "$(jq -r .hardware.name "$TMP/rows.jsonl" | paste -sd,)" = "$list"
check "positions 1..n" test "$(jq -r '"\(.compare.position)/\(.compare.profiles)"' "$TMP/rows.jsonl" | paste -sd' ')" = \
  "1/5 2/5 3/5 4/5 5/5"
header=$(sed -n 2p "$TMP/table" | xargs)
check "table header names the profiles in order (got '$header')" test "$header" = "${profiles[*]}"
for label in "GPU" "host memory" "batch" "step ms (plan)" "step ms (sim)" "tokens/s" "TFLOPS (6N)" "MFU" "bound" \
  "fits" "host bytes" "device bytes" "sim error band"; do
  row=$(grep -m1 -- "^$label  " "$TMP/table")
  check "table row '$label' present" test -n "$row"
done
# a long GPU name is shown whole (it was cut to 22 columns: "NVIDIA GH200 480GB (H~"), the next column aligned
gh_gpu=$(jq -r .gpu.name experiments/hardware/gh200-480g.json)
gpu_row=$(grep -m1 '^GPU  ' "$TMP/table")
check "the GPU row shows gh200-480g's GPU whole ('$gh_gpu'): $gpu_row" grep -qF -- "  $gh_gpu  " <<< "$gpu_row"
head_to=$(sed -n 2p "$TMP/table") head_to=${head_to%%b200-2t*} row_to=${gpu_row%%NVIDIA B200*}
check "the column after it starts where its header does (${#head_to} = ${#row_to})" test ${#head_to} -eq ${#row_to}
fits_row=$(grep -m1 '^fits  ' "$TMP/table" | sed 's/^fits *//')
check "fits row: yes where the plan fits, the short resource where not (got '$fits_row')" \
  bash -c '[[ "$1" =~ ^no:\ host\ [0-9]+\>[0-9]+\ GB\ +yes\ +yes\ +yes\ +no:\ host ]]' _ "$fits_row"
check "the table says these are projections" grep -q "projections on each profile" "$TMP/table"

# --- each column is the plan of that profile alone (same keys, same numbers)
for hw in "${profiles[@]}"; do
  "$MT" plan "${q14[@]}" --hardware "$hw" | jq -cS . > "$TMP/alone.json"
  jq -cS "select(.hardware.name == \"$hw\") | del(.compare)" "$TMP/rows.jsonl" > "$TMP/col.json"
  check "column $hw = plan --hardware $hw" cmp -s "$TMP/alone.json" "$TMP/col.json"
done
# a path names the same profile as its name does
"$MT" plan "${q14[@]}" --compare experiments/hardware/gh200-480g.json 2> /dev/null | jq -cS 'del(.compare)' > "$TMP/bypath.json"
"$MT" plan "${q14[@]}" --hardware experiments/hardware/gh200-480g.json | jq -cS . > "$TMP/alone.json"
check "a profile by path = plan --hardware PATH" cmp -s "$TMP/alone.json" "$TMP/bypath.json"

# --batch auto picks per profile; each column is that profile's own --batch auto plan. It runs
# the sim for each profile's favourite candidates: under emulation (make test-aarch64) that
# outlasts the test's limit, so it is left to the native run (the same code).
q7=(--config $M/qwen2.5-7b.json --batch auto --seq-len 1024 --precision paper)
if [ -n "${MT_EMULATED:-}" ]; then
  echo "test_plan_compare: the --batch auto case skipped under emulation (run natively)"
else
  "$MT" plan "${q7[@]}" --compare h200-1.5t,gh200-480g > "$TMP/auto.jsonl" 2> "$TMP/auto_table"
  check "batch auto compare exits 0: $(tail -n 1 "$TMP/auto_table")" test $? -eq 0
  for hw in h200-1.5t gh200-480g; do
    "$MT" plan "${q7[@]}" --hardware "$hw" | jq -cS . > "$TMP/alone.json"
    jq -cS "select(.hardware.name == \"$hw\") | del(.compare)" "$TMP/auto.jsonl" > "$TMP/col.json"
    check "batch auto column $hw = plan --batch auto --hardware $hw" cmp -s "$TMP/alone.json" "$TMP/col.json"
  done
  check "batch auto: the table says which batch each column used" \
    grep -Eq '^batch +[0-9]+ \(auto\) +[0-9]+ \(auto\)$' "$TMP/auto_table"
fi

# --- the band of each column, from the fixture
want() { # want NAME PROFILE JQ-EXPR (on that profile's row)
  if jq -se "map(select(.hardware.name == \"$2\")) | .[0] | $3" "$TMP/rows.jsonl" > /dev/null; then ok; else
    bad "$1: $3 fails on $(jq -c "select(.hardware.name == \"$2\") | .compare" "$TMP/rows.jsonl")"; fi
}
want "validated profile: its own band" h200-128g \
  '.compare.band | .kind == "validated" and .worst_abs_err == 0.123 and .n == 3 and .text == "±13% (worst of 3 measured configs)"'
want "same GPU, other host: grown, saying why" h200-1.5t \
  '.compare.band | .kind == "grown" and .validated_profile == "h200-128g" and .worst_abs_err == 0.123 and (.why | test("host")) and (.why | test("test fixture"))'
want "other GPU: unvalidated" gh200-480g \
  '.compare.band | .kind == "unvalidated" and .text == "unvalidated (no measured configuration on this GPU)" and (has("worst_abs_err") | not)'
want "the band names its file" b200-2t ".compare.band.file == \"$MT_SIM_VALIDATION\""
want "sim step where the plan fits" gh200-480g '.compare.sim_step_ms > 0 and .compare.sim_tokens_per_s > 0'
want "no sim step where it does not fit" h100-128g '.compare.sim_step_ms == null and (.compare.sim_note | test("does not fit"))'
check "table: the band row" grep -Eq '^sim error band +±13% \(n=3\) +>=±13% grown +unvalidated' "$TMP/table"

# --- bad lists and contradicting options: exit 2, one stderr line, nothing on stdout
refuse() { # refuse NEEDLE ARGS...
  local needle=$1; shift
  "$MT" plan "${q14[@]}" "$@" > "$TMP/out" 2> "$TMP/err"
  local rc=$?
  if [ $rc -ne 2 ]; then bad "plan $*: exit $rc (want 2): $(tail -n 1 "$TMP/err")"; return; fi
  if [ "$(wc -l < "$TMP/err")" -ne 1 ]; then bad "plan $*: stderr is not one line: $(cat "$TMP/err")"; return; fi
  if [ -s "$TMP/out" ]; then bad "plan $*: wrote to stdout on error"; return; fi
  if ! grep -qF -- "$needle" "$TMP/err"; then bad "plan $*: stderr lacks '$needle': $(cat "$TMP/err")"; return; fi
  ok
}
refuse "--compare nosuch (profile 2 of 2): unknown profile" --compare gh200-480g,nosuch
refuse "--compare: empty value" --compare ""
refuse "entry 2 is empty" --compare gh200-480g,,b200-2t
refuse "entry 2 is empty" --compare gh200-480g,
refuse "gh200-480g is listed twice (entries 1 and 3)" --compare gh200-480g,b200-2t,gh200-480g
refuse "listed twice (entries 1 and 2, the same file)" --compare gh200-480g,experiments/hardware/gh200-480g.json
refuse "--compare and --hardware" --compare gh200-480g,b200-2t --hardware gh200-480g
refuse "--compare and --host-mem-gb" --compare gh200-480g,b200-2t --host-mem-gb 256
expect 2 "option --compare does not apply to \`megatrain train\`" train "${q14[@]}" --compare gh200-480g

# --- the validation file: a named file that is not there, or one that is malformed, is exit 1 naming it
MT_SIM_VALIDATION=$TMP/none.json expect 1 "MT_SIM_VALIDATION=$TMP/none.json: no such file" plan "${q14[@]}" --compare gh200-480g
jq '.schema = "other/1"' "$DATA/sim_validation.json" > "$TMP/schema.json"
MT_SIM_VALIDATION=$TMP/schema.json expect 1 "$TMP/schema.json: schema: expected" plan "${q14[@]}" --compare gh200-480g
jq 'del(.profiles["h200-128g"].worst_abs_err)' "$DATA/sim_validation.json" > "$TMP/key.json"
MT_SIM_VALIDATION=$TMP/key.json expect 1 "profiles.h200-128g.worst_abs_err: required number is missing" \
  plan "${q14[@]}" --compare gh200-480g

# --- the figure's data (harness/plan_compare.py, run by reproduce.sh for plots/compare.gp)
if command -v python3 > /dev/null; then
  python3 -m harness.plan_compare --bin "$(dirname "$MT")" --out "$TMP/pc" 2> "$TMP/pc.err"
  check "plan_compare.py exits 0: $(tail -n 1 "$TMP/pc.err")" test $? -eq 0
  n_hw=$(ls experiments/hardware/*.json | wc -l)
  check "compare.gpi: 2 configurations x every profile" grep -qx "M = $n_hw" "$TMP/pc/compare.gpi"
  check "compare.jsonl: the plan's rows, every profile twice" test "$(wc -l < "$TMP/pc/compare.jsonl")" -eq $((2 * n_hw))
  # h200-1.5t, Qwen2.5-14B: a grown band of 12.3% around the sim's TFLOPS (kind 1)
  check "compare.tsv: the band as TFLOPS bounds" awk -F'\t' '$2 == "h200-1.5t" && !done { done = 1
    ok = $7 == 1 && ($4 - $3 * 0.877) ^ 2 < 1e-3 && ($5 - $3 * 1.123) ^ 2 < 1e-3 } END { exit !ok }' "$TMP/pc/compare.tsv"
fi

finish
