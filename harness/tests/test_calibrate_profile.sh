#!/usr/bin/env bash
# harness/calibrate_profile.py on hand-made mt-microbench JSON (harness/tests/data/
# calibrate/): microbench_h100.json has cuda copy and GEMM rows as the GPU machine
# prints them (a triad with 3 repetitions + aggregates, an error row, cpu-backend
# copies that must not count); microbench_cpu.json is a cut of results/
# microbench_vm.json (no cuda); microbench_h200_rates.json is a hand-written FIXTURE (no GPU
# ran it, its numbers are made up; its context says so) of the gemm_bwd, kernel, attention and
# grad_sumsq rows part A prints, for the optional measured rates. Checks every replaced figure and its source, that
# unmeasured figures and sources stay, the profile invariants of
# test_hardware_profiles.sh, that `megatrain plan --hardware FILE` fits and
# `train --backend sim --hardware FILE` runs 2 steps on the result, and one-line
# errors (exit 1) for bad input. Skips (77) without python3, jq or build/bin/megatrain.
. "$(dirname "$0")/lib.sh" python3 jq
BIN=$MT_BIN
[ -x "$BIN/megatrain" ] || { echo "skipped: no $BIN/megatrain"; exit 77; }
CAL="python3 -m harness.calibrate_profile"
DATA=harness/tests/data/calibrate
BASE=experiments/hardware/h100-128g.json
CFG=megatrain/tests/data/tiny5_llama.json
# check NAME FILE [JQ-ARGS...] JQ-EXPR: passes when the expression is true
check() {
  local name=$1 file=$2; shift 2
  if jq -e "$@" "$file" >/dev/null 2>&1; then pass "$name"; else fail "$name: ${*: -1}"; fi
}

# The invariants test_hardware_profiles.sh checks, for one file.
invariants() {
  jq -r --arg name "$2" '
    def num_paths: ["gpu.peak_tflops.bf16","gpu.peak_tflops.tf32","gpu.peak_tflops.fp32","gpu.gemm_efficiency",
      "gpu.hbm_gbps","gpu.hbm_bytes","link.theory_gbps","link.h2d_gbps.pinned","link.h2d_gbps.pageable",
      "link.d2h_gbps.pinned","link.d2h_gbps.pageable","link.duplex_factor","host.mem_bytes","host.mem_gbps",
      "host.cpu_cores","host.numa_nodes",
      (["adamw_bytes_per_param","adamw_gbps","adamw_params_per_s"][] as $k | ["fp32","paper","mixed"][] | "host.\($k).\(.)")];
    def sourced($p): ($p | split(".")) as $s | .sources as $src
      | [range(1; ($s | length) + 1) as $n | $s[0:$n] | join(".")] | any(.[]; . as $k | $src | has($k));
    . as $root |
    [ (if .schema != "megatrain.hardware/1" then "schema" else empty end),
      (if .name != $name then "name \(.name) != \($name)" else empty end),
      (num_paths[] as $p | ($root | getpath($p | split("."))) as $v
        | if ($v | type) != "number" or $v <= 0 then "\($p) not positive"
          elif ($root | sourced($p) | not) then "\($p) unsourced" else empty end),
      (if .gpu.gemm_efficiency > 1 or .link.duplex_factor > 1 then "factor above 1" else empty end),
      (["fp32","paper","mixed"][] as $m | $root.host
        | (.adamw_gbps[$m] * 1e9 / .adamw_bytes_per_param[$m]) as $want
        | if ((.adamw_params_per_s[$m] - $want) | fabs) > 0.01 * $want then "params_per_s.\($m)" else empty end),
      (.link as $l | ["h2d_gbps","d2h_gbps"][] as $d
        | if $l[$d].pageable > $l[$d].pinned or $l[$d].pinned > $l.theory_gbps then "\($d) order" else empty end)
    ] | .[]' "$1"
}

loads() { # FILE: plan fits, the sim runs 2 steps
  local f=$1 tag=$2
  if "$BIN/megatrain" plan --config "$CFG" --batch 2 --seq-len 32 --precision paper --hardware "$f" \
      > "$tmp/plan_$tag.json" 2> "$tmp/plan_$tag.err"; then
    check "$tag: plan --hardware fits, predicts a step" "$tmp/plan_$tag.json" '.fits == true and .step_ms > 0'
  else fail "$tag: plan --hardware $f: $(cat "$tmp/plan_$tag.err")"; fi
  if "$BIN/megatrain" train --config "$CFG" --backend sim --hardware "$f" --steps 2 --batch 2 --seq-len 32 \
      --precision paper > "$tmp/sim_$tag.jsonl" 2> "$tmp/sim_$tag.err"; then
    if [ "$(jq -s 'length == 2 and all(.step_ms > 0)' "$tmp/sim_$tag.jsonl" 2>/dev/null)" = true ]; then
      pass "$tag: sim runs 2 steps"
    else fail "$tag: sim output: $(cat "$tmp/sim_$tag.jsonl")"; fi
  else fail "$tag: train --backend sim --hardware $f: $(cat "$tmp/sim_$tag.err")"; fi
}

# ---- the GPU machine's microbench
out=$tmp/h100-cal.json
if $CAL "$BASE" "$DATA/microbench_h100.json" --out "$out" 2> "$tmp/err"; then pass "gpu: exit 0"
else fail "gpu: exit $?: $(cat "$tmp/err")"; fi
[ -f "$out" ] || { echo "FAIL no output"; exit 1; }
grep -q '^figure .*old .*new .*change' "$tmp/err" && pass "gpu: summary table on stderr" || fail "gpu: no summary table"
grep -q 'link.duplex_factor .*0.8 .*0.832 .*+4.0%' "$tmp/err" && pass "gpu: table row old/new/change" ||
  fail "gpu: table row for duplex_factor: $(grep duplex "$tmp/err")"
problems=$(invariants "$out" h100-cal)
[ -z "$problems" ] && pass "gpu: profile invariants (name from --out)" || fail "gpu: invariants: $problems"
U='2026-12-01T10:00:00Z, NVIDIA H100 80GB HBM3'
check "gpu: link at the largest size, cuda only (not 64 MiB, not copy/cpu)" "$out" \
  '.link.h2d_gbps.pinned == 53.6 and .link.d2h_gbps.pinned == 54.9'
check "gpu: pageable at its largest size (256 MiB)" "$out" '.link.h2d_gbps.pageable == 21.4 and .link.d2h_gbps.pageable == 18.6'
check "gpu: duplex = bidir h2d_gbps / solo h2d gbps" "$out" '.link.duplex_factor == 0.832'
check "gpu: triad = median of 3 repetitions (not the mean)" "$out" '.host.mem_gbps == 44.2'
check "gpu: adamw GB/s per mode" "$out" '.host.adamw_gbps == {"fp32":31.2,"paper":30.5,"mixed":32}'
check "gpu: adamw params/s = GB/s / bytes per param" "$out" \
  '.host.adamw_params_per_s.paper == 1386363636 and .host.adamw_params_per_s.fp32 == 1114285714'
check "gpu: gemm_efficiency = mean of the largest bf16 shapes / peak / sim size factor" "$out" \
  '(.gpu.gemm_efficiency - (605.2 / 989 / (5.562e11 / (5.562e11 + 1073741824)))) | fabs < 2e-4'
check "gpu: env figures" "$out" '.host.mem_bytes == 135089602560 and .host.cpu_cores == 16 and .link.theory_gbps == 63'
check "gpu: sources of replaced figures" "$out" --arg u "$U" \
  '.sources as $s | ($s["link.h2d_gbps.pinned"] == "measured: mt-microbench copy/cuda/pinned/h2d/1073741824, \($u)")
   and ($s["link.d2h_gbps.pageable"] == "measured: mt-microbench copy/cuda/pageable/d2h/268435456, \($u)")
   and ($s["host.mem_gbps"] | startswith("measured: mt-microbench triad/16777216") and endswith($u))
   and ($s["link.duplex_factor"] | startswith("measured: mt-microbench copy/cuda/pinned/bidir/1073741824"))
   and ($s["gpu.gemm_efficiency"] | startswith("measured: mt-microbench gemm/cuda/bf16/8192/3584/18944"))
   and ([$s["host.adamw_gbps.\(("fp32","paper","mixed"))"] | startswith("measured: mt-microbench adamw/")] | all)
   and ($s | has("host.adamw_gbps") | not)'
jq -e --arg u "$U" '.sources["link.duplex_factor"] | endswith($u)' "$out" >/dev/null &&
  pass "gpu: source ends with utc, gpu" || fail "gpu: source suffix"
check "gpu: unmeasured figures and sources kept" "$out" --slurpfile b "$BASE" \
  '$b[0] as $b | .gpu.peak_tflops == $b.gpu.peak_tflops and .gpu.hbm_gbps == $b.gpu.hbm_gbps
   and .gpu.hbm_bytes == $b.gpu.hbm_bytes and .gpu.name == $b.gpu.name and .host.adamw_bytes_per_param == $b.host.adamw_bytes_per_param
   and .sources["gpu.peak_tflops"] == $b.sources["gpu.peak_tflops"] and .sources["gpu.hbm_gbps"] == $b.sources["gpu.hbm_gbps"]'
grep -q 'ignored, error_occurred: copy/cuda/pinned/h2d/4194304' "$tmp/err" && pass "gpu: error row reported and ignored" ||
  fail "gpu: error row not reported"
loads "$out" gpu
check "gpu: plan uses the calibrated figures" "$tmp/plan_gpu.json" \
  '.prediction.gemm_efficiency == 0.6131 and .hardware.name == "h100-cal" and .host.mem_bytes == 135089602560'
# calibrating again does not stack the description note; --name and stdout
if $CAL "$out" "$DATA/microbench_h100.json" --name again > "$tmp/again.json" 2>/dev/null; then
  check "gpu: stdout, --name, description not stacked" "$tmp/again.json" \
    '.name == "again" and (.description | [match("calibrated:"; "g")] | length == 1)'
else fail "gpu: stdout run"; fi
$CAL "$BASE" "$DATA/microbench_h100.json" --no-env --out "$tmp/noenv.json" 2>/dev/null
check "gpu: --no-env keeps the env figures" "$tmp/noenv.json" \
  '.host.mem_bytes == 137438953472 and (.sources["host.mem_bytes"] | startswith("measured") | not)'

# ---- a cpu-only run: host figures only
out=$tmp/vm.json
if $CAL "$BASE" "$DATA/microbench_cpu.json" --out "$out" 2> "$tmp/err"; then pass "cpu: exit 0"
else fail "cpu: exit $?: $(cat "$tmp/err")"; fi
problems=$(invariants "$out" vm)
[ -z "$problems" ] && pass "cpu: profile invariants" || fail "cpu: invariants: $problems"
check "cpu: link and GPU figures kept (copy/cpu is not the link)" "$out" --slurpfile b "$BASE" \
  '$b[0] as $b | .link == $b.link and .gpu == $b.gpu'
check "cpu: link and GPU sources kept" "$out" --slurpfile b "$BASE" \
  '$b[0].sources as $bs | [.sources | to_entries[] | select(.key | startswith("link.") or startswith("gpu."))
   | .value == $bs[.key]] | all'
check "cpu: host figures measured" "$out" \
  '.host.mem_gbps == 24.71 and .host.adamw_gbps.fp32 == 40.9 and (.sources["host.mem_gbps"] | endswith("2026-11-22T07:13:05Z, no GPU"))'
grep -q 'no GPU in this run' "$tmp/err" && pass "cpu: warns that only host figures came" || fail "cpu: no warning"
loads "$out" cpu

# ---- attention per implementation: the labs' rows (hand-made test input in their formats)
out=$tmp/attn.json
if $CAL "$BASE" --attention "$DATA/attention_sweep.jsonl" --attention "$DATA/torch_reference.jsonl" \
    --env "$DATA/env_h100.json" --out "$out" 2> "$tmp/err"; then pass "attention: exit 0"
else fail "attention: exit $?: $(cat "$tmp/err")"; fi
check "attention: one table per implementation, ascending T, the median where a T has two rows" "$out" \
  '.gpu.attention_tflops == {"cudnn":[[1024,300],[4096,460]],"native":[[1024,150],[4096,250]],
                             "torch_sdpa":[[1024,200],[4096,350]]}'
check "attention: a row with an error and a GEMM row are not points" "$out" '.gpu.attention_tflops | has("torch_sdpa_flash") | not'
check "attention: each table sourced with its file, shape, utc and GPU" "$out" \
  '.sources["gpu.attention_tflops.native"] == "measured: attention/native/fwd_bwd, causal forward + backward, attention_sweep.jsonl (B 1 NH 28 NKV 4 HD 128), 2026-12-01T11:00:00Z, NVIDIA H100 80GB HBM3"
   and (.sources["gpu.attention_tflops.torch_sdpa"] | contains("torch_reference.jsonl"))'
check "attention: nothing else changed (no microbench: no env figures either)" "$out" --slurpfile b "$BASE" \
  '$b[0] as $b | (.gpu | del(.attention_tflops)) == $b.gpu and .link == $b.link and .host == $b.host'
problems=$(invariants "$out" attn)
[ -z "$problems" ] && pass "attention: profile invariants" || fail "attention: invariants: $problems"
loads "$out" attn
# the planner prices each implementation at its table (log-T interpolation between 1k and 4k)
"$BIN/megatrain" plan --config "$CFG" --batch 2 --seq-len 2048 --precision paper --hardware "$out" --attention native \
  > "$tmp/plan_native.json" 2>/dev/null
check "attention: plan --attention native prices its measured rate at T=2048" "$tmp/plan_native.json" \
  '.attention.kernel == "native" and (.attention.tflops - 200 | fabs) < 1e-9 and (.attention.source | startswith("measured"))'
"$BIN/megatrain" plan --config "$CFG" --batch 2 --seq-len 2048 --precision paper --hardware "$BASE" \
  > "$tmp/plan_base.json" 2>/dev/null
check "attention: without a table the assumed fraction, said so" "$tmp/plan_base.json" \
  '.attention.kernel == "cudnn" and (.attention.tflops - 0.35 * 989 | fabs) < 1e-9 and (.attention.source | startswith("assumed"))'
# a microbench run after it keeps the tables (what parts A and C file one after the other)
$CAL "$out" "$DATA/microbench_h100.json" --out "$tmp/attn_mb.json" 2>/dev/null
check "attention: a later microbench calibration keeps the tables and both notes" "$tmp/attn_mb.json" --slurpfile a "$out" \
  '.gpu.attention_tflops == $a[0].gpu.attention_tflops and .sources["gpu.attention_tflops.cudnn"] == $a[0].sources["gpu.attention_tflops.cudnn"]
   and (.description | test("calibrated: mt-microbench .*attention measured: "))'
$CAL "$tmp/attn_mb.json" --attention "$DATA/attention_sweep.jsonl" --env "$DATA/env_h100.json" > "$tmp/attn2.json" 2>/dev/null
check "attention: re-measuring replaces its note, not stacked" "$tmp/attn2.json" \
  '(.description | [match("attention measured:"; "g")] | length == 1) and (.description | test("calibrated: mt-microbench"))'

# ---- host AdamW from the engine's own pass (--cpu-optimizers): paper measured, mixed/fp32 the same
# GB/s assumed, params/s derived; the row's env block dates and places it (the lent H200's, part B)
if $CAL "$BASE" --cpu-optimizers results/labs/h200-B-cpu_adam.jsonl --out "$tmp/adam.json" 2> "$tmp/adam_err"; then
  pass "cpu-optimizers: exit 0"
else fail "cpu-optimizers: $(cat "$tmp/adam_err")"; fi
check "cpu-optimizers: paper GB/s and params/s from megatrain_adamw_paper (143.23 GB/s, 22 B/param)" "$tmp/adam.json" \
  '.host.adamw_gbps.paper == 143.23 and .host.adamw_params_per_s.paper == 6510000000
   and .host.adamw_params_per_s.mixed == 5120000000 and .host.adamw_gbps.fp32 == 143.23'
check "cpu-optimizers: sources (measured with file, shape, date, GPU, engine; mixed assumed)" "$tmp/adam.json" \
  '(.sources["host.adamw_gbps.paper"] | startswith("measured: baselines/peers/cpu_optimizers.py megatrain_adamw_paper, h200-B-cpu_adam.jsonl (n_params 104857600")
     and contains("2026-11-26T02:56:01Z, NVIDIA H200 host, engine at 955be61e2b40"))
   and (.sources["host.adamw_gbps.mixed"] | startswith("assumed:"))
   and .gpu.gemm_efficiency == 0.6'
check "cpu-optimizers: the profile names the host's rows, which price the peers' optimizers" "$tmp/adam.json" \
  '.host.cpu_optimizers == "results/labs/h200-B-cpu_adam.jsonl" and (.sources["host.cpu_optimizers"] | startswith("measured:"))'
invariants "$tmp/adam.json" adam > "$tmp/adam_inv"
[ -s "$tmp/adam_inv" ] && fail "cpu-optimizers: invariants: $(cat "$tmp/adam_inv")" || pass "cpu-optimizers: invariants hold"
grep -v megatrain_adamw_paper results/labs/h200-B-cpu_adam.jsonl > "$tmp/no_ours.jsonl"

# ---- the optional measured GPU rates (calibrate_gpu_rates.py) from the FIXTURE microbench_h200_rates.json:
# backward GEMMs, memory-bound kernels, attention by work; the H200 base (gpu.name_match H200)
RATES=$DATA/microbench_h200_rates.json
H200=experiments/hardware/h200-128g.json
out=$tmp/rates.json
if $CAL "$H200" "$RATES" --no-env --out "$out" 2> "$tmp/rates_err"; then pass "rates: exit 0"
else fail "rates: exit $?: $(cat "$tmp/rates_err")"; fi
jq -e '.context.fixture | test("HAND-WRITTEN TEST INPUT")' "$RATES" > /dev/null && pass "rates: the input says it is a fixture" ||
  fail "rates: $RATES does not mark itself a fixture"
# the backward efficiency, recomputed here: the one efficiency pricing every shape's time, through the size factor
want=$(python3 - "$RATES" <<'EOF2'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["benchmarks"]
        if r["name"].startswith("gemm_bwd/cuda/bf16/") and not r.get("error_occurred")]
num = den = 0.0
for r in rows:
    N, IC, OC = (int(x) for x in r["name"].split("/")[3:6])
    W = float(N) * IC * OC
    f = W / (W + 1073741824.0) * min(1.0, min(N, IC, OC) / 64.0)
    a = 4 * W / f
    num, den = num + a, den + a / (r["tflops"] / (989 * f))
print(round(num / den, 4))
EOF2
)
check "rates: gemm_bwd_efficiency = sum(a) / sum(a / e) over the shapes ($want)" "$out" --argjson w "$want" \
  '.gpu.gemm_bwd_efficiency == $w and $w > 0.69 and $w < 0.72'
check "rates: kernel_gbps from sim_gbps (cuda bf16 rows only), rope_bwd as rope_fwd" "$out" \
  '.gpu.kernel_gbps == {"rmsnorm_fwd":2600,"add_rmsnorm_fwd":3000,"rmsnorm_bwd_add":2500,"swiglu_fwd":3900,
                        "swiglu_bwd":3800,"rope_fwd":2800,"xent_fwd_bwd":2400,"rope_bwd":2800}'
check "rates: attention_work_tflops.cudnn: [B*NH*T^2, tflops] from the label's rows, ascending" "$out" \
  '.gpu.attention_work_tflops == {"cudnn":[[29360128,180],[671088640,420],[2684354560,470],[10737418240,540]]}'
check "rates: each figure sourced (measured: mt-microbench <bench>, utc, gpu; rope_bwd derived from rope_fwd)" "$out" \
  '.sources as $s | ($s["gpu.gemm_bwd_efficiency"] | startswith("measured: mt-microbench gemm_bwd/cuda/bf16/16384/5120/5120/0,")
     and endswith(", 2026-12-02T10:00:00Z, NVIDIA H200"))
   and ($s["gpu.kernel_gbps.swiglu_bwd"] == "measured: mt-microbench kernel/cuda/bf16/swiglu_bwd/8192/13824 sim_gbps (the sim'"'"'s bytes of the call per second), 2026-12-02T10:00:00Z, NVIDIA H200")
   and ($s["gpu.kernel_gbps.rope_bwd"] | startswith("derived: gpu.kernel_gbps.rope_fwd, the same kernel"))
   and ($s["gpu.attention_work_tflops.cudnn"] | startswith("measured: mt-microbench attention/cuda/bf16/1/1024/28/4,")
     and contains("label cudnn"))'
check "rates: the drain's sum of squares alone: host.grad_sumsq_gbps, sourced" "$out" \
  '.host.grad_sumsq_gbps == 53 and (.sources["host.grad_sumsq_gbps"] |
     startswith("measured: mt-microbench grad_sumsq/bf16/603979776 bytes_per_second (one read of the gradients)")
     and endswith(", 2026-12-02T10:00:00Z, NVIDIA H200"))'
check "rates: nothing else changed" "$out" --slurpfile b "$H200" \
  '$b[0] as $b | (.gpu | del(.gemm_bwd_efficiency, .kernel_gbps, .attention_work_tflops)) == $b.gpu
   and .link == $b.link and (.host | del(.grad_sumsq_gbps)) == $b.host'
grep -q 'ignored, error_occurred: gemm_bwd/cuda/bf16/4096/4096/4096/0' "$tmp/rates_err" &&
  grep -q 'gpu.gemm_bwd_efficiency / gpu.gemm_efficiency = 0.84' "$tmp/rates_err" &&
  pass "rates: an error row ignored, said so; backward against forward noted" || fail "rates: stderr: $(cat "$tmp/rates_err")"
problems=$(invariants "$out" rates)
[ -z "$problems" ] && pass "rates: profile invariants" || fail "rates: invariants: $problems"
loads "$out" rates
# the kernels calibrate_gpu_rates.py knows are the ones the profile loader accepts
py=$(python3 -c 'import sys; from harness import calibrate_gpu_rates as g; print(" ".join(g.KERNELS))')
c=$(sed -n '/kernel_names\[MT_HW_KERNELS\] = {/,/};/p' megatrain/model/hardware_rates.c | grep -o '"[a-z_0-9]*"' | tr -d '"' | tr '\n' ' ')
[ "$py " = "$c" ] && pass "rates: calibrate_gpu_rates.KERNELS = hardware_rates.c kernel_names" || fail "kernels: '$py' vs '$c'"
# Each key moves the sim's compute in its direction on the 14B width (2 layers, batch 16 x 1024): the
# fixture's backward GEMMs (0.71) and kernels (2400-3900 GB/s) are slower than gemm_efficiency 0.834 and
# 0.8 x 4800 GB/s, its attention at the launch's work (420 TFLOP/s) faster than the table by T (178.5)
jq '.num_hidden_layers = 2 | .max_window_layers = 2' experiments/models/qwen2.5-14b.json > "$tmp/m14.json"
compute() { # PROFILE: the sim's compute_ms of the last step
  "$BIN/megatrain" train --config "$tmp/m14.json" --backend sim --hardware "$1" --precision paper --batch 16 \
    --seq-len 1024 --steps 3 --init random --data synthetic 2>/dev/null | jq -s 'last | .compute_ms'
}
full=$(compute "$out")
for key in gemm_bwd_efficiency kernel_gbps attention_work_tflops; do
  jq "del(.gpu.$key)" "$out" > "$tmp/no_$key.json"
  eval "no_$key=\$(compute \"\$tmp/no_\$key.json\")"
done
jq -n --argjson f "$full" --argjson b "$no_gemm_bwd_efficiency" --argjson k "$no_kernel_gbps" \
  --argjson a "$no_attention_work_tflops" '$f > $b and $f > $k and $f < $a' | grep -q true &&
  pass "rates: sim compute $full ms; without the backward key $no_gemm_bwd_efficiency, the kernels $no_kernel_gbps, the work table $no_attention_work_tflops" ||
  fail "rates: sim compute in the wrong direction: $full vs $no_gemm_bwd_efficiency, $no_kernel_gbps, $no_attention_work_tflops"
"$BIN/megatrain" plan --config "$tmp/m14.json" --batch 16 --seq-len 1024 --precision paper --hardware "$out" > "$tmp/plan_rates.json"
"$BIN/megatrain" plan --config "$tmp/m14.json" --batch 16 --seq-len 1024 --precision paper \
  --hardware "$tmp/no_gemm_bwd_efficiency.json" > "$tmp/plan_nobwd.json"
check "rates: the planner prices attention at B 16 x NH 40 x T^2 (420) and the backward GEMMs at theirs" "$tmp/plan_rates.json" \
  --slurpfile n "$tmp/plan_nobwd.json" '.attention.tflops == 420 and (.attention.source | startswith("measured: mt-microbench attention/"))
   and .prediction.gemm_bwd_efficiency == 0.7068 and .prediction.compute_ms > $n[0].prediction.compute_ms'
# what a projection on it rests on (harness/sweep/cost_sources.py): at bf16 the measured rates replace
# the assumptions they settle; at fp32 (not what was measured) the assumptions stand
python3 -m harness.sweep.cost_sources "$out" > "$tmp/cs.json" && python3 -m harness.sweep.cost_sources "$out"   --precision fp32 > "$tmp/cs32.json" &&
check "rates: cost_sources: measured at bf16 (rope_bwd derived), assumptions settled; fp32 as before" "$tmp/cs.json"   --slurpfile f "$tmp/cs32.json" '.by_kind as $k | .figures as $g
   | ($k.measured | index("gpu.gemm_bwd_efficiency") and index("gpu.attention_work_tflops.cudnn")
      and index("gpu.kernel_gbps.swiglu_bwd")) and ($k.derived | index("gpu.kernel_gbps.rope_bwd"))
   and ($g | has("sim: backward GEMMs at gpu.gemm_efficiency") or has("sim: attention table at any batch x heads")
      or has("gpu.attention_tflops.cudnn") or has("sim: memory-bound kernels at MT_SIM_HBM_EFF x gpu.hbm_gbps") | not)
   and ($g["sim: unmeasured memory-bound ops at MT_SIM_HBM_EFF x gpu.hbm_gbps"].source | contains("rmsnorm_bwd, ")
      and (contains("swiglu_bwd") | not))
   and ($f[0].figures | has("sim: backward GEMMs at gpu.gemm_efficiency") and has("gpu.attention_tflops.cudnn")
      and (has("gpu.gemm_bwd_efficiency") | not))'
# the committed profiles stay as they are: a microbench without these rows writes none of the keys
check "rates: no such rows, no such keys (the h100 microbench)" "$tmp/h100-cal.json" \
  '.gpu | has("gemm_bwd_efficiency") or has("kernel_gbps") or has("attention_work_tflops") | not'

# ---- bad input: one line on stderr, exit 1, no output file
expect_error() { # NAME PATTERN ARGS...
  local name=$1 pat=$2; shift 2
  rm -f "$tmp/bad_out.json"
  $CAL "$@" --out "$tmp/bad_out.json" > /dev/null 2> "$tmp/bad_err"
  local rc=$?
  if [ $rc = 1 ] && [ "$(wc -l < "$tmp/bad_err")" = 1 ] && grep -q -- "$pat" "$tmp/bad_err" && [ ! -e "$tmp/bad_out.json" ]
  then pass "error: $name"
  else fail "error: $name: rc=$rc stderr: $(cat "$tmp/bad_err")"; fi
}
echo '{"context": {' > "$tmp/trunc.json"
expect_error "truncated microbench JSON" "not valid JSON" "$BASE" "$tmp/trunc.json"
expect_error "truncated profile JSON" "not valid JSON" "$tmp/trunc.json" "$DATA/microbench_h100.json"
expect_error "missing file" "cannot read" "$BASE" "$tmp/nope.json"
jq 'del(.link.duplex_factor)' "$BASE" > "$tmp/p_nodup.json"
expect_error "profile without link.duplex_factor" "link.duplex_factor: required number is missing" \
  "$tmp/p_nodup.json" "$DATA/microbench_h100.json"
jq '.schema = "other/1"' "$BASE" > "$tmp/p_schema.json"
expect_error "profile with another schema" "schema" "$tmp/p_schema.json" "$DATA/microbench_h100.json"
jq 'del(.context.mt_env)' "$DATA/microbench_h100.json" > "$tmp/m_noenv.json"
expect_error "microbench without context.mt_env" "context.mt_env" "$BASE" "$tmp/m_noenv.json"
jq 'del(.benchmarks)' "$DATA/microbench_h100.json" > "$tmp/m_nobench.json"
expect_error "microbench without benchmarks" "benchmarks" "$BASE" "$tmp/m_nobench.json"
jq '.benchmarks |= map(select(.name | startswith("gemm/cpu")))' "$DATA/microbench_cpu.json" > "$tmp/m_none.json"
expect_error "microbench measuring no figure" "no benchmark in it measures" "$BASE" "$tmp/m_none.json" --no-env
expect_error "nothing to calibrate from" "nothing to calibrate from" "$BASE"
expect_error "attention without an env block" "give --env" "$BASE" --attention "$DATA/attention_sweep.jsonl"
grep -v '"attention/' "$DATA/torch_reference.jsonl" > "$tmp/no_attn.jsonl"
expect_error "attention file without a timed row" "no attention/<kernel>/fwd_bwd row" "$BASE" \
  --attention "$tmp/no_attn.jsonl" --env "$DATA/env_h100.json"
echo '{"bench":"attention/native/fwd_bwd","T":1024.5,"tflops":100}' > "$tmp/bad_t.jsonl"
expect_error "attention row with a fractional T" "expected a whole T" "$BASE" --attention "$tmp/bad_t.jsonl" \
  --env "$DATA/env_h100.json"

expect_error "cpu-optimizers without our row" "no megatrain_adamw_paper row" "$BASE" --cpu-optimizers "$tmp/no_ours.jsonl"

# a malformed row of the GPU-rate families: one line naming the bench and what is wrong
jq '.benchmarks |= map(if .name | startswith("gemm_bwd/cuda/bf16/16384/5120/5120/") then del(.tflops) else . end)' \
  "$RATES" > "$tmp/r1.json"
expect_error "gemm_bwd row without tflops" "gemm_bwd/cuda/bf16/16384/5120/5120/0: expected a positive counter 'tflops'" \
  "$H200" "$tmp/r1.json"
jq '.benchmarks |= map(if .name | startswith("gemm_bwd/cuda/bf16/16384/5120/7168/") then .name = "gemm_bwd/cuda/bf16/16384/5120/0/manual_time" | .run_name = .name else . end)' \
  "$RATES" > "$tmp/r2.json"
expect_error "gemm_bwd row with three arguments" "expected gemm_bwd/cuda/bf16/<N>/<IC>/<OC>/<flags>" "$H200" "$tmp/r2.json"
jq '.benchmarks |= map(if .name | startswith("kernel/cuda/bf16/add_rmsnorm_fwd/") then .name = "kernel/cuda/bf16/layernorm_fwd/16384/5120/manual_time" | .run_name = .name else . end)' \
  "$RATES" > "$tmp/r3.json"
expect_error "kernel the profile has no key for" "no profile key gpu.kernel_gbps.layernorm_fwd" "$H200" "$tmp/r3.json"
jq '.benchmarks |= map(if .name | startswith("kernel/cuda/bf16/swiglu_fwd/") then .sim_gbps = 0 else . end)' "$RATES" > "$tmp/r4.json"
expect_error "kernel row with a zero rate" "kernel/cuda/bf16/swiglu_fwd/8192/13824: expected a positive counter 'sim_gbps'" \
  "$H200" "$tmp/r4.json"
jq '.benchmarks |= map(if .name | startswith("attention/cuda/bf16/16/") then del(.label) else . end)' "$RATES" > "$tmp/r5.json"
expect_error "attention row without its implementation" "attention/cuda/bf16/16/1024/40/8: expected a label naming the implementation" \
  "$H200" "$tmp/r5.json"

finish
