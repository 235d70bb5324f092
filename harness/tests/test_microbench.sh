#!/usr/bin/env bash
# mt-microbench smoke test: one tiny run of each C benchmark family on the cpu
# backend; the Google Benchmark JSON carries the env block in its context, AdamW
# reports params_per_s and bytes_per_second (fp32 and the mixed layout, each checked against the
# scalar reference), the drain's sum of squares its exact result and rate, copies and GEMMs (forward, and backward as the
# layer calls it: plain and accumulated into f32) verified their data, the memory-bound kernels
# report the sim's bytes per second with finite outputs, attention its causal TFLOP/s.
set -uo pipefail
command -v jq >/dev/null || { echo "skipped: jq not installed"; exit 77; }
BIN=${MT_BIN:-build/bin}
[ -x "$BIN/mt-microbench" ] || { echo "skipped: $BIN/mt-microbench not built (no Google Benchmark)"; exit 77; }
export MT_ENV_NO_GIT=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
filter='^adamw/(fp32|mixed)/|^grad_sumsq/|^triad/|^copy/cpu/pinned/(h2d|bidir)/1048576/|^gemm/cpu/f32/256/|^gemm_bwd/cpu/f32/|^kernel/cpu/f32/(rmsnorm_bwd_add|swiglu_fwd|xent_fwd_bwd)/|^attention/cpu/f32/|^layer/cpu/f32/'
"$BIN/mt-microbench" --benchmark_filter="$filter" --benchmark_min_time=0.01 > "$tmp/out.json" 2> "$tmp/err" ||
  { echo "FAIL: mt-microbench exited $?"; cat "$tmp/err"; exit 1; }
fails=0
check() {
  if jq -e "$2" "$tmp/out.json" >/dev/null 2>&1; then echo "ok   $1"
  else echo "FAIL $1: $2"; fails=$((fails + 1)); fi
}
check env_context '.context.mt_env | fromjson | has("git_sha") and has("cpu_cores") and has("utc") and (keys | length == 14)'
check adamw_isa '.context.mt_adamw_isa | IN("avx512", "avx2", "sve", "neon", "scalar")'
check adamw_label '.context.mt_adamw_isa as $i | [.benchmarks[] | select(.name | startswith("adamw/fp32/"))][0].label | startswith($i + ",")'
check count '[.benchmarks[] | select(.run_type == "iteration")] | length == 15'
check no_errors '[.benchmarks[] | select(.error_occurred == true)] | length == 0'
check adamw '[.benchmarks[] | select(.name | startswith("adamw/fp32/"))][0] | .params_per_s > 0 and .bytes_per_second > 0 and .bytes_per_param == 28'
# mixed: f32 master, bf16 p out and g in (28 B/param without write-allocate); each family checks its
# last step against the scalar reference, bitwise
check adamw_mixed '[.benchmarks[] | select(.name | startswith("adamw/mixed/"))][0] | .params_per_s > 0 and .bytes_per_param == 28 and .wrong == 0'
check adamw_checked '[.benchmarks[] | select(.name | startswith("adamw/"))] | length == 2 and all(.wrong == 0)'
check adamw_rate '[.benchmarks[] | select(.name | startswith("adamw/fp32/"))][0] | (.bytes_per_second / .params_per_s - 28 | fabs) < 0.01'
check triad '[.benchmarks[] | select(.name | startswith("triad/"))][0] | .bytes_per_second > 0 and .wrong == 0'
check grad_sumsq '[.benchmarks[] | select(.name | startswith("grad_sumsq/bf16/"))][0] | .bytes_per_second > 0 and .wrong == 0 and ((.gbps * 1e9 / .bytes_per_second - 1) | fabs) < 1e-6'
check copy '[.benchmarks[] | select(.name | startswith("copy/cpu/pinned/h2d/1048576"))][0] | .gbps > 0 and .gbps_min <= .gbps and .gbps <= .gbps_max and .wrong == 0'
check bidir '[.benchmarks[] | select(.name | startswith("copy/cpu/pinned/bidir/"))][0] | .h2d_gbps > 0 and .d2h_gbps > 0 and .wrong == 0'
check gemm '[.benchmarks[] | select(.name | startswith("gemm/cpu/f32/256/256/256"))][0] | .tflops > 0 and .wrong == 0'
check gemm_bwd '[.benchmarks[] | select(.name | startswith("gemm_bwd/cpu/f32/"))] | length == 2 and all(.tflops > 0 and .wrong == 0)'
check kernels '[.benchmarks[] | select(.name | startswith("kernel/cpu/f32/"))] | length == 3 and all(.sim_gbps > 0 and .nonfinite == 0)'
check attention '[.benchmarks[] | select(.name | startswith("attention/cpu/f32/"))] | length == 1 and all(.tflops > 0 and .nonfinite == 0 and .label == "native")'
check layer '[.benchmarks[] | select(.name | startswith("layer/cpu/f32/"))] | length == 2 and all(.tflops > 0)'
if "$BIN/mt-microbench" --benchmark_filter='^no_such_benchmark$' >/dev/null 2>&1; then
  echo "FAIL no_match: a filter matching nothing exited 0"; fails=$((fails + 1))
else echo "ok   no_match"; fi
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; cat "$tmp/err"; exit 1; }
echo "all checks passed"
