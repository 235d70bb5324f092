#!/usr/bin/env bash
# A vendor's profile (issue 40): measured copy rates above the link's theoretical
# rate (its link.kind's, docs/REFERENCE.md#hardware, or its own link.theory_gbps)
# are refused with the numbers; every shipped profile loads. And `plan` on a
# terminal prints a short summary (the JSON when piped or with --json).
source "$(dirname "$0")/lib.sh"
TTY="python3 $(dirname "$0")/tty_run.py"
M=$FIX/tiny_llama
base=experiments/hardware/h200-1.5t.json

for f in experiments/hardware/*.json; do
  "$MT" plan --model $M --hardware "$f" > /dev/null 2> "$TMP/err"
  check "shipped profile $(basename "$f") loads ($(tail -n 1 "$TMP/err"))" test $? -eq 0
done

jq '.link.h2d_gbps.pinned = 100000' $base > "$TMP/fast.json"
expect 1 "link.h2d_gbps.pinned: 100000 GB/s exceeds the pcie-gen5-x16 link's theoretical 63 GB/s per direction (32 GT/s x 16 lanes x 128/130 encoding" \
  plan --model $M --hardware "$TMP/fast.json"
jq '.link.d2h_gbps.pageable = 64' $base > "$TMP/fast.json"
expect 1 "link.d2h_gbps.pageable: 64 GB/s exceeds the pcie-gen5-x16 link's theoretical 63 GB/s" plan --model $M --hardware "$TMP/fast.json"
# The profile's own theory above its kind's: refused (a Gen5 link is not 100 GB/s).
jq '.link.theory_gbps = 100' $base > "$TMP/fast.json"
expect 1 "link.theory_gbps: 100 GB/s exceeds the pcie-gen5-x16 link's theoretical 63 GB/s" plan --model $M --hardware "$TMP/fast.json"
# A narrower slot (theory_gbps below the kind's): the lower one holds.
jq '.link.theory_gbps = 31.5' $base > "$TMP/fast.json"
expect 1 "link.h2d_gbps.pinned: 55 GB/s exceeds the link's theoretical 31.5 GB/s per direction (link.theory_gbps)" \
  plan --model $M --hardware "$TMP/fast.json"
jq '.link.kind = "pcie-gen4-x16" | del(.link.theory_gbps)' $base > "$TMP/fast.json"
expect 1 "exceeds the pcie-gen4-x16 link's theoretical 31.5 GB/s" plan --model $M --hardware "$TMP/fast.json"
# NVLink-C2C: 450 per direction.
jq '.link.h2d_gbps.pinned = 460' experiments/hardware/gh200-480g.json > "$TMP/fast.json"
expect 1 "the nvlink-c2c link's theoretical 450 GB/s" plan --model $M --hardware "$TMP/fast.json"
# The sim reads the same loader: train --backend sim refuses it too.
jq '.link.h2d_gbps.pinned = 100000' $base > "$TMP/fast.json"
expect 1 "exceeds the pcie-gen5-x16 link's theoretical 63 GB/s" train --model $M --backend sim --hardware "$TMP/fast.json" --steps 1
# Rates at the theory are accepted.
jq '.link.h2d_gbps.pinned = 63 | .link.d2h_gbps.pinned = 63' $base > "$TMP/ok.json"
expect 0 "" plan --model $M --hardware "$TMP/ok.json"

# plan on a terminal: a short summary, no JSON; piped: the JSON object; --json: JSON on the terminal.
$TTY "$TMP/err" "$MT" plan --model $M --hardware h200-1.5t > "$TMP/tty"
check "plan tty: exit 0" test $? -eq 0
check "plan tty: no JSON ($(head -c 100 "$TMP/tty"))" test "$(grep -c '^{' "$TMP/tty")" -eq 0
check "plan tty: what, machine, memory, fits, predicted" test \
  "$(grep -cE '^(plan: llama 0.10M params, 2 layers|machine: h200-1.5t \(NVIDIA H200\)|memory: host .* of 1.43 TB|fits: yes|predicted: [0-9.e+-]+ ms/step \| [0-9]+ tokens/s)' "$TMP/tty")" -eq 5
"$MT" plan --model $M --hardware h200-1.5t > "$TMP/piped" 2>/dev/null
check "plan piped: one JSON object" jq -e '.schema == "megatrain.plan/1" and .fits == true' "$TMP/piped"
$TTY "$TMP/err" "$MT" plan --model $M --hardware h200-1.5t --json > "$TMP/json"
check "plan tty --json: the same JSON object as piped" cmp -s "$TMP/json" "$TMP/piped"
$TTY "$TMP/err" "$MT" plan --model $M --hardware h200-1.5t --host-mem-gb 0.001 > "$TMP/tty"
check "plan tty, not fitting: says what is short" grep -qE '^fits: no \| host needs [0-9.]+ MB, has 950 kB' "$TMP/tty"
# plan --compare on a terminal: the table (stderr) alone; piped: one JSON line a profile, as before.
$TTY "$TMP/err" "$MT" plan --model $M --compare h200-1.5t,gh200-480g > "$TMP/tty"
check "compare tty: no JSON on the terminal" test "$(grep -c '^{' "$TMP/tty")" -eq 0
check "compare tty: the table on stderr" grep -q 'h200-1.5t *gh200-480g' "$TMP/err"
"$MT" plan --model $M --compare h200-1.5t,gh200-480g > "$TMP/piped" 2>/dev/null
check "compare piped: a JSON line a profile" jq -se 'length == 2 and .[1].compare.profile == "gh200-480g"' "$TMP/piped"
finish
