#!/usr/bin/env bash
# experiments/hardware/*.json follow experiments/hardware/README.md: the nine
# required profiles exist, every key is there with a positive number, every figure
# has a source, and derived values agree (params_per_s, pageable <= pinned <= theory); the
# optional measured GPU rates (gemm_bwd_efficiency, kernel_gbps, attention_work_tflops) are sourced
# as measurements;
# gpu.name_match, where a profile has it, maps GPU names to the profiles it did before
# the names lived in the profiles, for the planner (--hardware measured) and Python alike.
. "$(dirname "$0")/lib.sh" jq
dir=experiments/hardware
for name in h100-128g h200-128g h200-1.5t gh200-480g rtx4090-256g mi300x-1.5t mi355x-1.5t b200-2t gb200-480g; do
  [ -f "$dir/$name.json" ] || { echo "FAIL: $dir/$name.json missing"; fails=$((fails + 1)); }
done
for f in "$dir"/*.json; do
  name=$(basename "$f" .json)
  problems=$(jq -r --arg name "$name" '
    def num_paths: ["gpu.peak_tflops.bf16","gpu.peak_tflops.tf32","gpu.peak_tflops.fp32","gpu.gemm_efficiency",
      "gpu.hbm_gbps","gpu.hbm_bytes","link.theory_gbps","link.h2d_gbps.pinned","link.h2d_gbps.pageable",
      "link.d2h_gbps.pinned","link.d2h_gbps.pageable","link.duplex_factor","host.mem_bytes","host.mem_gbps",
      "host.cpu_cores","host.numa_nodes",
      (["adamw_bytes_per_param","adamw_gbps","adamw_params_per_s"][] as $k | ["fp32","paper","mixed"][] | "host.\($k).\(.)")];
    def at($p): getpath($p | split("."));
    def sourced($p): ($p | split(".")) as $s | .sources as $src   # a source for the key or a parent object
      | [range(1; ($s | length) + 1) as $n | $s[0:$n] | join(".")] | any(.[]; . as $k | $src | has($k));
    . as $root |
    [ (if .schema != "megatrain.hardware/1" then "schema is \(.schema)" else empty end),
      (if .name != $name then "name \(.name) != file name" else empty end),
      (if (.description | type) != "string" then "no description" else empty end),
      (if (.gpu.name | type) != "string" or (.link.kind | type) != "string" then "gpu.name / link.kind missing" else empty end),
      (num_paths[] as $p | $root | at($p) as $v
        | if ($v | type) != "number" or $v <= 0 then "\($p) is not a positive number: \($v)"
          elif ($root | sourced($p) | not) then "\($p) has no entry in sources"
          else empty end),
      (if .gpu.gemm_efficiency > 1 or .link.duplex_factor > 1 then "an efficiency or factor above 1" else empty end),
      (["fp32","paper","mixed"][] as $m | $root.host
        | (.adamw_gbps[$m] * 1e9 / .adamw_bytes_per_param[$m]) as $want
        | if ((.adamw_params_per_s[$m] - $want) | fabs) > 0.01 * $want then "adamw_params_per_s.\($m) != adamw_gbps*1e9/bytes_per_param" else empty end),
      (.host.adamw_bytes_per_param | if . != {"fp32":28,"paper":22,"mixed":28} then "adamw_bytes_per_param != 28/22/28" else empty end),
      (.link as $l | ["h2d_gbps","d2h_gbps"][] as $d
        | if $l[$d].pageable > $l[$d].pinned or $l[$d].pinned > $l.theory_gbps then "\($d): not pageable <= pinned <= theory" else empty end),
      (.sources | to_entries[] | select((.value | type) != "string" or (.value | length) < 10) | "source \(.key) is not a sentence"),
      # the optional measured GPU rates: each a measurement or derived from one, with its source
      ([(if .gpu.gemm_bwd_efficiency then "gpu.gemm_bwd_efficiency" else empty end),
        ((.gpu.kernel_gbps // {}) | keys[] | "gpu.kernel_gbps.\(.)"),
        ((.gpu.attention_work_tflops // {}) | keys[] | "gpu.attention_work_tflops.\(.)")][] as $p
        | ($p | split(".")) as $s | [$root.sources[$p], $root.sources[$s[0:2] | join(".")]] | map(select(.)) | .[0]
        | if . == null then "\($p) has no entry in sources"
          elif (test("^(measured|derived): ") | not) then "\($p): source is not a measurement: \(.)" else empty end),
      (if (.gpu.gemm_bwd_efficiency // 0) > 1 then "gpu.gemm_bwd_efficiency above 1" else empty end),
      (.gpu.name_match | if . == null then empty
        elif type != "array" or length < 1 or length > 4 or any(.[]; type != "string" or length < 1 or length > 31)
        then "gpu.name_match is not 1..4 non-empty strings: \(.)" else empty end)
    ] | .[]' "$f" 2>&1) || problems="not valid JSON: $problems"
  if [ -n "$problems" ]; then echo "FAIL $name:"; echo "$problems" | sed 's/^/    /'; fails=$((fails + 1))
  else echo "ok   $name"; fi
done
# One peak table: a profile's bf16 peak is its GPU's entry in harness/dense_peaks.json.
peaks=harness/dense_peaks.json
for f in "$dir"/*.json; do
  name=$(basename "$f" .json)
  got=$(jq -r --slurpfile p "$peaks" '(.gpu.name | ascii_upcase) as $n | .gpu.peak_tflops.bf16 as $have
    | [$p[0].gpus[] | select(.match | split(" ") | all(. as $w | $n | contains($w | ascii_upcase)))][0] as $e
    | if $e == null then "no entry in \($peaks | tostring) for \(.gpu.name)" elif $e.bf16_tflops != $have
      then "gpu.peak_tflops.bf16 \($have) != dense_peaks.json \($e.match) \($e.bf16_tflops)" else "" end' --arg peaks "$peaks" "$f")
  if [ -n "$got" ]; then echo "FAIL $name: $got"; fails=$((fails + 1)); else echo "ok   $name: bf16 peak as harness/dense_peaks.json"; fi
done
# gpu.name_match: no string in two profiles, "*" in one profile at most, and a GPU's name picks
# the same profile as before the names lived in the profiles (GH200's name holds "H200").
dup=$(jq -rs '[.[] | .name as $n | (.gpu.name_match // [])[] | {s: ., n: $n}] | group_by(.s)
  | map(select(length > 1) | "\(.[0].s) in \(map(.n) | join(", "))") | .[]' "$dir"/*.json)
[ -z "$dup" ] && echo "ok   gpu.name_match: each string in one profile" || { echo "FAIL gpu.name_match: $dup"; fails=$((fails + 1)); }
got=$(command -v python3 > /dev/null || exit 0; python3 -c '
import sys; from harness import resultslib as r
for g in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA GH200 480GB", "Tesla T4", "", None):
    print(g, r.profile_of_gpu(g), r.profile_of_gpu(g, fallback=True), sep="|")' 2>&1)
want="NVIDIA H100 80GB HBM3|h100-128g|h100-128g
NVIDIA H100 PCIe|h100-128g|h100-128g
NVIDIA H200|h200-128g|h200-128g
NVIDIA GH200 480GB|h200-128g|h200-128g
Tesla T4|None|h100-128g
|None|h100-128g
None|None|h100-128g"
[ -z "$got" ] && echo "note: no python3: resultslib.profile_of_gpu not checked" ||
[ "$got" = "$want" ] && echo "ok   gpu.name_match: GPU names to profiles (resultslib.profile_of_gpu)" ||
  { echo "FAIL resultslib.profile_of_gpu:"; echo "$got"; fails=$((fails + 1)); }
# Every profile loads where it is used: the planner (plan --hardware) and the sim
# backend (train --backend sim), each giving a positive step time.
BIN=${MT_BIN:-$(pwd)/build/bin}
if [ -x "$BIN/megatrain" ]; then
  jq '.num_hidden_layers = 2 | .max_window_layers = 2' experiments/models/qwen2.5-7b.json > "$tmp/m.json"
  for f in "$dir"/*.json; do
    name=$(basename "$f" .json)
    common=(--config "$tmp/m.json" --batch 2 --seq-len 1024 --precision paper --hardware "$name")
    plan=$("$BIN/megatrain" plan "${common[@]}" 2>"$tmp/err") && ms=$(echo "$plan" | jq -e '.step_ms | select(. > 0)') \
      || { echo "FAIL $name: plan: $(tail -n 1 "$tmp/err")"; fails=$((fails + 1)); continue; }
    sim=$("$BIN/megatrain" train --backend sim "${common[@]}" --init random --data synthetic --steps 2 2>"$tmp/err") \
      && sms=$(echo "$sim" | jq -se '[.[] | select(.step_ms)] | last | .step_ms | select(. > 0)') \
      || { echo "FAIL $name: sim: $(tail -n 1 "$tmp/err")"; fails=$((fails + 1)); continue; }
    echo "ok   $name: plan $ms ms, sim $sms ms per step (qwen2.5-7b width, 2 layers, batch 2)"
  done
  # --hardware measured takes its rates from the profile gpu.name_match marks "*" (no GPU here):
  # moved to another profile, the planner follows it; a malformed list is refused.
  mkdir -p "$tmp/hw"
  for f in "$dir"/*.json; do jq 'del(.gpu.name_match)' "$f" > "$tmp/hw/$(basename "$f")"; done
  jq '.gpu.name_match = ["*"]' "$dir/rtx4090-256g.json" > "$tmp/hw/rtx4090-256g.json"
  common=(--config "$tmp/m.json" --batch 2 --seq-len 1024 --precision paper --hardware measured)
  note=$(MT_HARDWARE_DIR=$tmp/hw "$BIN/megatrain" plan "${common[@]}" 2>&1 | jq -r .hardware.note)
  case "$note" in *"from profile rtx4090-256g"*) echo "ok   plan --hardware measured: rates from the profile marked \"*\"" ;;
    *) echo "FAIL measured with \"*\" on rtx4090-256g: $note"; fails=$((fails + 1)) ;; esac
  note=$("$BIN/megatrain" plan "${common[@]}" 2>&1 | jq -r .hardware.note)
  case "$note" in *"from profile h100-128g"*) echo "ok   plan --hardware measured: rates from h100-128g here (no GPU)" ;;
    *) echo "FAIL measured here: $note"; fails=$((fails + 1)) ;; esac
  jq '.gpu.name_match = "H100"' "$dir/h100-128g.json" > "$tmp/hw/h100-128g.json"
  err=$(MT_HARDWARE_DIR=$tmp/hw "$BIN/megatrain" plan "${common[@]/measured/h100-128g}" 2>&1 >/dev/null)
  case "$err" in *"gpu.name_match: expected 1..4 strings"*) echo "ok   a gpu.name_match that is not a list is refused" ;;
    *) echo "FAIL bad gpu.name_match: $err"; fails=$((fails + 1)) ;; esac
else
  echo "note: $BIN/megatrain not built: profiles not loaded by plan and sim"
fi
[ "$fails" -eq 0 ] || { echo "$fails profile(s) failed"; exit 1; }
echo "all checks passed"
