#!/usr/bin/env bash
# `megatrain train --backend sim`: simulated steps print JSON lines with a step
# time and no loss, --trace writes a Chrome trace with events on all three
# streams, and a bad or missing hardware profile fails with one stderr line.
source "$(dirname "$0")/lib.sh"
if ! command -v jq > /dev/null; then echo "jq not installed: skipped"; exit 77; fi

CFG=$DATA/tiny5_llama.json
jqe() { jq -e "$@" > /dev/null; }
run_sim() { "$MT" train --config "$CFG" --backend sim --steps 3 --batch 2 --seq-len 32 "$@"; }

# --- a simulated run on the lent machine's profile, paper precision, with a trace
if run_sim --hardware h100-128g --precision paper --trace "$TMP/trace.json" > "$TMP/out.jsonl" 2> "$TMP/err"; then
  ok
else
  bad "sim run failed: $(cat "$TMP/err")"
fi
check "three JSON lines" test "$(jq -s length "$TMP/out.jsonl")" = 3
check "every step_ms > 0" test "$(jq -s 'all(.step_ms > 0)' "$TMP/out.jsonl")" = true
check "loss is null (no data under sim)" test "$(jq -s 'all(.loss == null)' "$TMP/out.jsonl")" = true
check "tokens_per_s and tflops > 0" test "$(jq -s 'all(.tokens_per_s > 0 and .tflops > 0)' "$TMP/out.jsonl")" = true
check "trace parses" jqe '.traceEvents | length > 0' "$TMP/trace.json"
for tid in 0 1 2; do
  check "trace has ops on stream $tid" jqe "[.traceEvents[] | select(.ph == \"X\" and .pid == 1 and .tid == $tid)] | length > 0" "$TMP/trace.json"
done
check "trace names the three streams" jqe '[.traceEvents[] | select(.name == "thread_name") | .args.name] | (any(test("compute")) and any(test("h2d")) and any(test("d2h")))' "$TMP/trace.json"
check "trace has host-thread work" jqe '[.traceEvents[] | select(.ph == "X" and (.pid == 2 or .tid >= 3))] | length > 0' "$TMP/trace.json"
check "trace events have ts and dur" jqe 'all(.traceEvents[] | select(.ph == "X"); .ts >= 0 and .dur > 0)' "$TMP/trace.json"
check "no temporary trace file left" test -z "$(ls "$TMP" | grep 'trace.json.tmp')"

# --- same configuration twice: the same simulated times
run_sim --hardware h100-128g --precision paper > "$TMP/again.jsonl" 2> /dev/null
check "simulated times are reproducible" test "$(jq -c .step_ms "$TMP/out.jsonl")" = "$(jq -c .step_ms "$TMP/again.jsonl")"

# --- fp32 (exact fp32 compute) is slower than paper (bf16) on the same machine
# (a larger step than run_sim's: each option is given once)
sim_8x256() { "$MT" train --config "$CFG" --backend sim --steps 3 --batch 8 --seq-len 256 "$@"; }
sim_8x256 --hardware h100-128g --precision fp32 > "$TMP/fp32.jsonl" 2> /dev/null
sim_8x256 --hardware h100-128g --precision paper > "$TMP/bf16.jsonl" 2> /dev/null
check "fp32 step slower than paper" test "$(jq -s '.[0].step_ms' "$TMP/fp32.jsonl" | cut -d. -f1)" -gt \
  "$(jq -s '.[0].step_ms' "$TMP/bf16.jsonl" | cut -d. -f1)"

# --- errors: one line on stderr, exit 1..125, nothing on stdout
expect_error() { # expect_error NAME NEEDLE ARGS...
  local name=$1 needle=$2; shift 2
  "$MT" "$@" > "$TMP/eout" 2> "$TMP/eerr"
  local rc=$?
  if [ $rc -lt 1 ] || [ $rc -gt 125 ]; then bad "$name: exit status $rc"; cat "$TMP/eerr" >&2; return; fi
  if [ "$(wc -l < "$TMP/eerr")" -ne 1 ]; then bad "$name: want one stderr line, got: $(cat "$TMP/eerr")"; return; fi
  if ! grep -qF -- "$needle" "$TMP/eerr"; then bad "$name: stderr lacks '$needle': $(cat "$TMP/eerr")"; return; fi
  if [ -s "$TMP/eout" ]; then bad "$name: wrote to stdout"; return; fi
  ok
}
expect_error "unknown profile name" "no-such-machine" train --config "$CFG" --backend sim --hardware no-such-machine --steps 1
expect_error "sim without --hardware" "--hardware" train --config "$CFG" --backend sim --steps 1
jq 'del(.link.duplex_factor)' experiments/hardware/h100-128g.json > "$TMP/broken.json"
expect_error "profile missing a key" "link.duplex_factor" train --config "$CFG" --backend sim --hardware "$TMP/broken.json" --steps 1
echo '{"name": ' > "$TMP/malformed.json"
expect_error "malformed profile" "$TMP/malformed.json" train --config "$CFG" --backend sim --hardware "$TMP/malformed.json" --steps 1

finish
