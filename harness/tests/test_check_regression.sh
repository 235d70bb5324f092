#!/usr/bin/env bash
# ci/check_regression.sh on the fixtures in ci/tests/: exit status and row status
# for ok / warn / noise-masked / fail / bandwidth-fail / no matching row / noisy repeat /
# other machine / no finite step time /
# scalar step_ms with a stated noise / malformed input / bad usage / unmatched
# baselines, and --two-sided (deterministic rows: faster, fits, memory).
. "$(dirname "$0")/lib.sh" jq
chk=ci/check_regression.sh fx=ci/tests
# expect NAME WANT_RC PATTERN ARGS...: runs the checker, wants the exit status and a
# table line matching PATTERN (an awk regex; "-" for none).
expect() {
  local name=$1 want=$2 pat=$3; shift 3
  local out rc
  out=$(bash "$chk" "$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL $name: exit $rc, want $want"; echo "$out" | sed 's/^/    /'; fails=$((fails + 1)); return
  fi
  if [ "$pat" != "-" ] && ! grep -Eq -- "$pat" <<< "$out"; then
    echo "FAIL $name: no line matching /$pat/"; echo "$out" | sed 's/^/    /'; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}
expect ok          0 '^# summary: ok 3, warn 0, fail 0'        $fx/results_ok.jsonl $fx/baseline.jsonl
expect warn        0 '^WARN .* qwen2\.5-7b .* 15%'            $fx/results_warn.jsonl $fx/baseline.jsonl
expect noisy       0 '^OK .* qwen2\.5-7b .* 15% +500'         $fx/results_noisy.jsonl $fx/baseline.jsonl
expect fail        1 '^FAIL .* qwen2\.5-32b .* 30%'           $fx/results_fail.jsonl $fx/baseline.jsonl
expect bw_fail     1 '^FAIL .* 50 +44 '                       $fx/results_bw_fail.jsonl $fx/baseline.jsonl
expect bw_relaxed  0 '^OK .* 50 +44 '      --bw-frac 0.8      $fx/results_bw_fail.jsonl $fx/baseline.jsonl
expect nomatch     0 'no baseline 2, no data 0, noisy 0, other machine 1'                          $fx/results_nomatch.jsonl $fx/baseline.jsonl
expect stated_noise 0 '^OK .* qwen2\.5-3b .* 12\.5% +100'     $fx/results_scalar.jsonl $fx/baseline_scalar.jsonl
expect no_noise    0 '^WARN .* qwen2\.5-1\.5b '               $fx/results_scalar.jsonl $fx/baseline_scalar.jsonl
expect noise_frac  0 '^OK .* qwen2\.5-1\.5b '  --noise-frac 0.05 $fx/results_scalar.jsonl $fx/baseline_scalar.jsonl
expect fail_pct    0 '^WARN .* qwen2\.5-32b '  --fail-pct 50  $fx/results_fail.jsonl $fx/baseline.jsonl
expect malformed   2 'not JSON Lines'                         $fx/results_malformed.jsonl $fx/baseline.jsonl
expect missing     2 'cannot read'                            $fx/does_not_exist.jsonl $fx/baseline.jsonl
expect bad_option  2 'unknown option'      --bogus            $fx/results_ok.jsonl
expect bad_number  2 'not a non-negative number' --warn-pct x $fx/results_ok.jsonl $fx/baseline.jsonl
expect unmatched   0 'baselines unmatched 3$'                 $fx/results_nomatch.jsonl $fx/baseline.jsonl

# Noise and machines (CPU rows, ranges like a loaded 2-core CI): the same commit again, +30%
# on the median but inside 3x the noise, passes as NOISY; a 1.5x slowdown beyond it fails;
# the same row from another machine (cores, host memory) is reported, not judged; a run
# without a step time (null) against a timed baseline fails; a NaN or an Infinity is not JSON, so the
# one row check refuses the file before any verdict (exit 2, naming its line: issue 39).
expect cpu_repeat  0 '^NOISY .* qwen2-cpu8x256 .* 29\.8% .*within 3x noise' $fx/results_cpu_repeat.jsonl $fx/baseline_cpu.jsonl
expect cpu_slow    1 '^FAIL .* qwen2-cpu8x256 .* 50% '    $fx/results_cpu_slow.jsonl $fx/baseline_cpu.jsonl
expect cpu_slow_k  0 '^NOISY .* 50% '  --noise-k 5         $fx/results_cpu_slow.jsonl $fx/baseline_cpu.jsonl
expect cpu_other   0 '^OTHER-MACHINE .* baseline from AMD EPYC/2/' $fx/results_cpu_other.jsonl $fx/baseline_cpu.jsonl
expect cpu_notime  2 'results_cpu_notime.jsonl:2: .*NaN'    $fx/results_cpu_notime.jsonl $fx/baseline_cpu.jsonl
for i in 1 2 3; do
  sed -n "${i}p" $fx/results_cpu_notime.jsonl > "$tmp/notime$i.jsonl"
done
expect cpu_notime_row1 1 '^FAIL .*no finite step time' "$tmp/notime1.jsonl" $fx/baseline_cpu.jsonl
expect cpu_notime_row2 2 'notime2.jsonl:1: .*NaN' "$tmp/notime2.jsonl" $fx/baseline_cpu.jsonl
expect cpu_notime_row3 2 'notime3.jsonl:1: .*Infinity' "$tmp/notime3.jsonl" $fx/baseline_cpu.jsonl
# a row from another machine is judged once that machine has its own baseline
cat $fx/baseline_cpu.jsonl > "$tmp/two_machines.jsonl"
jq -c '.step_ms = {median: 1200, min: 1190, max: 1210}' $fx/results_cpu_other.jsonl >> "$tmp/two_machines.jsonl"
expect cpu_other_own 1 '^FAIL .* 50% '                     $fx/results_cpu_other.jsonl "$tmp/two_machines.jsonl"

# --two-sided (deterministic rows): faster is a change too, and so are fits and planned memory
jq -c 'if .model == "qwen2.5-7b" and .system == "megatrain" then .step_ms.median = 900 | .step_ms.min = 900
       | .step_ms.max = 900 else . end' $fx/baseline.jsonl > "$tmp/faster.jsonl"
expect faster_one_sided 0 '^OK .* qwen2\.5-7b .* -10%'              "$tmp/faster.jsonl" $fx/baseline.jsonl
expect faster_two_sided 1 '^FAIL .* qwen2\.5-7b .* -10%' --two-sided --fail-pct 5 "$tmp/faster.jsonl" $fx/baseline.jsonl
jq -c '.peak_gpu_bytes = 1000 | .fits = true' $fx/baseline.jsonl > "$tmp/mem_base.jsonl"
jq -c 'if .system == "zero3" then .peak_gpu_bytes = 1100 else .peak_gpu_bytes = 1000 end | .fits = true' \
  $fx/baseline.jsonl > "$tmp/mem_cur.jsonl"
expect memory_two_sided 1 '^FAIL .* zero3 '   --two-sided --fail-pct 5 "$tmp/mem_cur.jsonl" "$tmp/mem_base.jsonl"
expect memory_one_sided 0 'fail 0'                        "$tmp/mem_cur.jsonl" "$tmp/mem_base.jsonl"
jq -c 'if .system == "zero3" then .fits = false else . end' "$tmp/mem_base.jsonl" > "$tmp/unfit.jsonl"
expect fits_two_sided   1 '^FAIL .* zero3 '   --two-sided "$tmp/unfit.jsonl" "$tmp/mem_base.jsonl"
# rows that differ only in variant (ablations) or hardware (projections) each find their own baseline
jq -c '., (.variant = "bind=copy" | .step_ms.median *= 2 | .step_ms.min *= 2 | .step_ms.max *= 2)' \
  $fx/baseline.jsonl > "$tmp/variants.jsonl"
expect variants 0 'ok 8, warn 0, fail 0, no baseline 0, .*other machine 0'   "$tmp/variants.jsonl" "$tmp/variants.jsonl"
finish
