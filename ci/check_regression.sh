#!/usr/bin/env bash
# check_regression.sh: compares a results JSONL against committed baselines.
#
#   ci/check_regression.sh [options] RESULTS.jsonl [BASELINE.jsonl ...]
#     baselines default to results/baselines/*.jsonl (relative to the repo root; committed:
#     sim.jsonl holds the deterministic projected rows, gpu_*.jsonl rows measured on a GPU)
#   options: --warn-pct P   (10)  --fail-pct P (25)  --bw-frac F (0.9)  --noise-k K (3)
#            --noise-frac F       noise estimate as a fraction of the baseline median,
#                                 used when neither row has step_ms min/max (0)
#            --two-sided          for deterministic rows (the sim, the planner): a change
#                                 either way is a regression: |delta| is judged, and so are
#                                 fits and peak_gpu_bytes / peak_host_bytes (|change| > fail-pct)
#
# Rows match on (experiment, model, batch, seq_len, precision, system (or schedule), mode,
# variant, hardware, layers_run, config.host_mem_gb); "measured" rows are never compared
# with projections. A measured row is judged only against a baseline from the same machine:
# env.cpu_model, cpu_cores, host_mem_bytes and gpu_name all equal (--two-sided: gpu_name
# only; projections: any, the profile names the machine). For each judged row:
#   delta = (median - base median) / base median     (step_ms; a plain number counts as the median)
#   noise = sqrt(hr_base^2 + hr_cur^2), hr = (max - min)/2 of step_ms; when neither row
#           has a range: step_ms.noise of either row (the larger), else noise-frac x base median
#   FAIL  delta > fail-pct and (median - base median) > K x noise (--two-sided: noise aside);
#         or h2d_gbps < bw-frac x baseline h2d_gbps;  or no finite step time (null, NaN,
#         Infinity) against a timed baseline
#   NOISY delta > fail-pct but within K x noise: not evidence either way (not a failure)
#   WARN  delta > warn-pct and (median - base median) > K x noise
#   OK    otherwise;  NOBASE: no baseline row matches (not an error);  NODATA: neither timed
#   OTHER-MACHINE: baselines match only from another machine (reported, never failed)
# Prints a table (stdout) and a summary with the number of baseline rows no result
# matched. Exit: 0 no FAIL (warnings allowed), 1 at least one FAIL, 2 bad usage or input.
set -euo pipefail

die() { echo "check_regression: $*" >&2; exit 2; }
command -v jq >/dev/null || die "jq not found; HINT: apt-get install jq (make deps)"

warn_pct=10 fail_pct=25 bw_frac=0.9 noise_frac=0 noise_k=3 two_sided=false
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --warn-pct) warn_pct=${2:?--warn-pct needs a value}; shift 2 ;;
    --fail-pct) fail_pct=${2:?--fail-pct needs a value}; shift 2 ;;
    --bw-frac) bw_frac=${2:?--bw-frac needs a value}; shift 2 ;;
    --noise-frac) noise_frac=${2:?--noise-frac needs a value}; shift 2 ;;
    --noise-k) noise_k=${2:?--noise-k needs a value}; shift 2 ;;
    --two-sided) two_sided=true; shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) files+=("$1"); shift ;;
  esac
done
for v in "$warn_pct" "$fail_pct" "$bw_frac" "$noise_frac" "$noise_k"; do
  [[ "$v" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "threshold '$v' is not a non-negative number"
done
[ ${#files[@]} -ge 1 ] || die "usage: check_regression.sh [options] RESULTS.jsonl [BASELINE.jsonl ...]"
results=${files[0]}
baselines=("${files[@]:1}")
if [ ${#baselines[@]} -eq 0 ]; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  shopt -s nullglob
  baselines=("$root"/results/baselines/*.jsonl)
  shopt -u nullglob
  [ ${#baselines[@]} -gt 0 ] || die "no baseline given and none in $root/results/baselines/"
fi
for f in "$results" "${baselines[@]}"; do
  [ -r "$f" ] || die "$f: cannot read"
  jq -e 'if type == "object" then true else error("a line is not a JSON object") end' "$f" >/dev/null 2>&1 ||
    die "$f: not JSON Lines (one JSON object per line)"
done
# every row through the one schema check the Python readers apply (finite figures, min <= median <= max)
PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}" \
  python3 -m harness.resultslib.validate_rows --baseline "$results" "${baselines[@]}" ||
  die "a row above is not a results row; HINT: python3 -m harness.resultslib.validate_rows --baseline FILE"
[ -n "$(jq -c . "$results" | head -1)" ] || die "$results: no rows"

# Shared jq definitions: the match key (no machine in it) and the machine a row ran on.
defs='
  def key: [.experiment, .model, .batch, .seq_len, .precision, (.system // .schedule), (.mode // "measured"),
            (.variant // null), (.hardware // null), (.layers_run // null), (.config.host_mem_gb // null)];
  def machine($two): if (.mode // "measured") == "projected" then null
                     elif $two then (.env.gpu_name // null)
                     else [.env.cpu_model, .env.cpu_cores, .env.host_mem_bytes, .env.gpu_name] end;'
table=$(jq -n -r \
  --slurpfile cur "$results" \
  --slurpfile base <(cat "${baselines[@]}") \
  --argjson warn "$warn_pct" --argjson fail "$fail_pct" --argjson bw "$bw_frac" --argjson nf "$noise_frac" \
  --argjson k "$noise_k" --argjson two "$two_sided" "$defs"'
  def rel(a; b): if (a | type) == "number" and (b | type) == "number" and b != 0 then (a - b) / b
                 elif a == b then 0 else 1e9 end;
  # jq 1.6 reads NaN as null and Infinity as the largest double: neither is a time
  def finite: type == "number" and (isnan | not) and fabs < 1e300;
  def med: if (.step_ms | type) == "object" then .step_ms.median else .step_ms end;
  def timed: (med | finite) and ((.step_ms | type) != "object"
             or ([.step_ms.min, .step_ms.max, .step_ms.noise] | map(select(. != null and (finite | not))) | length) == 0);
  def hr: if (.step_ms | type) == "object" and (.step_ms.max | type) == "number" and (.step_ms.min | type) == "number"
          then (.step_ms.max - .step_ms.min) / 2 else null end;
  def stated: if (.step_ms | type) == "object" then .step_ms.noise else null end;
  def fmt(d): if finite | not then "-" else (. * pow(10; d) | round) / pow(10; d) | tostring end;
  def mname: if type == "array" then [.[] | select(. != null) | tostring] | join("/") else tostring end;
  ($base | group_by(key | tojson) | map({key: (.[0] | key | tojson), value: .}) | from_entries) as $B
  | $cur[] | . as $c | ($c | machine($two)) as $cm_machine
  | ($B[$c | key | tojson] // []) as $cands
  | ([$cands[] | select(machine($two) == $cm_machine)] | last) as $b   # the last duplicate wins
  | ($cands | last) as $other
  | ($c | med) as $cm | ($b | if . == null then null else med end) as $bm
  | (if $b == null then null
     elif ($b | hr) == null and ($c | hr) == null then
       ([($b | stated), ($c | stated)] | map(select(type == "number")) | max) // ($nf * ($bm // 0))
     else ((($b | hr) // 0) * (($b | hr) // 0) + (($c | hr) // 0) * (($c | hr) // 0)) | sqrt end) as $noise
  | ($b != null and ($b | timed) and ($c | timed | not)) as $notime
  | (if $b == null or $notime or ($cm | type) != "number" or ($bm | type) != "number" or $bm <= 0 then null
     else ($cm - $bm) / $bm end) as $delta
  | ($c.h2d_gbps) as $ch | ($b.h2d_gbps // null) as $bh
  | (($ch | type) == "number" and ($bh | type) == "number" and $ch < $bw * $bh) as $bwfail
  | (if $delta == null then null elif $two then ($delta | fabs) else $delta end) as $d
  | ($delta != null and ((($cm - $bm) | if $two then fabs else . end) > $k * $noise)) as $beyond
  | ($two and $b != null and (($c.fits != $b.fits)
       or (rel($c.peak_gpu_bytes; $b.peak_gpu_bytes) | fabs) > $fail / 100
       or (rel($c.peak_host_bytes; $b.peak_host_bytes) | fabs) > $fail / 100)) as $memfail
  | (if $b == null and $other != null then "OTHER-MACHINE"
     elif $b == null then "NOBASE"
     elif $notime or ($d != null and $d > $fail / 100 and ($beyond or $two)) or $bwfail or $memfail then "FAIL"
     elif $d != null and $d > $fail / 100 then "NOISY"
     elif $d != null and $d > $warn / 100 and $beyond then "WARN"
     elif $delta == null and ($bwfail | not) and ($ch == null or $bh == null) then "NODATA"
     else "OK" end) as $status
  | [$status, ($c.env.gpu_name // "-"), ($c.experiment // "-"), ($c.model // "-"), ($c.batch // "-" | tostring),
     ($c.seq_len // "-" | tostring), ($c.precision // "-"), ($c.system // $c.schedule // "-"),
     ($bm | fmt(2)), ($cm | fmt(2)), (if $delta == null then "-" else ($delta * 100 | fmt(1)) + "%" end),
     ($noise | fmt(2)), ($bh | fmt(1)), ($ch | fmt(1)),
     (if $status == "OTHER-MACHINE" then "baseline from " + ($other | machine($two) | mname)
      elif $notime then "no finite step time" elif $status == "NOISY" then "within \($k)x noise"
      else "-" end)]
  | @tsv') || die "jq failed on $results"

printf '# check_regression: %s vs %s (same machine only; WARN > %s%%, FAIL > %s%%, both beyond %sx noise; FAIL if h2d < %sx)\n' \
  "$results" "${baselines[*]}" "$warn_pct" "$fail_pct" "$noise_k" "$bw_frac"
{
  printf 'status\tgpu\texperiment\tmodel\tbatch\tseq_len\tprecision\tsystem\tbase_ms\tcur_ms\tdelta\tnoise_ms\tbase_h2d\tcur_h2d\tnote\n'
  printf '%s\n' "$table"
} | awk -F'\t' '
  { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } n = NR; if (NF > nf) nf = NF }
  END { for (r = 1; r <= n; r++) { line = ""; for (i = 1; i <= nf; i++) line = line sprintf("%-*s  ", w[i], cell[r, i]);
        sub(/ +$/, "", line); print line } }'
count() { printf '%s\n' "$table" | awk -F'\t' -v s="$1" '$1 == s' | wc -l | tr -d ' '; }
nok=$(count OK) nwarn=$(count WARN) nfail=$(count FAIL) nnobase=$(count NOBASE) nnodata=$(count NODATA)
nnoisy=$(count NOISY) nother=$(count OTHER-MACHINE)
# Baseline rows of the experiments in RESULTS that no results row matched (a
# configuration removed from its sweep, or a run that did not produce it).
unmatched=$(jq -n -r --slurpfile cur "$results" --slurpfile base <(cat "${baselines[@]}") "$defs"'
  ($cur | map(key | tojson) | INDEX(.)) as $C | ($cur | map(.experiment) | unique) as $E
  | [$base[] | select(.experiment as $e | $E | index($e)) | select($C[key | tojson] == null)] | length') ||
  die "jq failed on the baselines"
echo "# summary: ok $nok, warn $nwarn, fail $nfail, no baseline $nnobase, no data $nnodata, noisy $nnoisy," \
  "other machine $nother, baselines unmatched $unmatched"
[ "$nfail" -eq 0 ]
