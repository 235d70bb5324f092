#!/usr/bin/env bash
# Bad results rows stop every reader with one line naming the file and line (exit 2), never
# a verdict or a traceback: an inverted step_ms range (min > median, median > max), a NaN,
# Infinity or overflowing figure, a row that is an array, a string, a boolean or an object
# where a number belongs (also inside the row's objects: sweep, config, ranks, fit), a
# missing key, a trace or experiment that is a path, a step of
# 0 ms (min included), a file starting with a byte-order mark. Each kind goes through the row
# check's command line (harness/resultslib/validate_rows.py), the claims table, the figures'
# export and file_rows, and in turn the docs check, the baselines recorder, the peer and sim
# checks (they load rows before running anything); then ci/check_regression.sh. The committed rows all
# pass the check. Needs python3 and jq.
. "$(dirname "$0")/lib.sh" python3 jq

# the committed results files are all good rows
mapfile -t committed < <(ls results/*.jsonl | grep -v -e /cpu_optimizers.jsonl -e /peer_hooks.jsonl)
exits 0 "validate_rows: every committed results/*.jsonl" python3 -m harness.resultslib.validate_rows "${committed[@]}"
exits 0 "validate_rows --baseline: results/baselines/*.jsonl" python3 -m harness.resultslib.validate_rows --baseline results/baselines/*.jsonl

# a copy of results/ where the first row of gpu_goal.jsonl (measured on a GPU) is made bad
mkdir -p "$tmp/good" && cp results/*.jsonl results/sim_validation.json "$tmp/good/"
F=gpu_goal.jsonl
# bad NAME PYTHON-EXPR-ON-THE-LINE: $tmp/NAME/ with line 1 of $F replaced by the expression's text
bad() {
  rm -rf "$tmp/$1" && cp -r "$tmp/good" "$tmp/$1"
  python3 - "$tmp/$1/$F" "$2" <<'EOF'
import json, sys
path, expr = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
r = json.loads(lines[0])
lines[0] = eval(expr, {"r": r, "json": json, "d": lambda r: json.dumps(r, separators=(",", ":"))})
open(path, "w").write("\n".join(lines) + "\n")
EOF
}
# NAME|the bad line, a Python expression of the good row r (d(r): r as compact JSON)
kinds=(
  "min_gt_median|d({**r, 'step_ms': {**r['step_ms'], 'min': r['step_ms']['median'] * 2}})"
  "median_gt_max|d({**r, 'step_ms': {**r['step_ms'], 'max': r['step_ms']['median'] / 2}})"
  "nan_median|d({**r, 'step_ms': {**r['step_ms'], 'median': 1}}).replace('\"median\":1', '\"median\":NaN')"
  "inf_tokens|d({**r, 'tokens_per_s': 1}).replace('\"tokens_per_s\":1', '\"tokens_per_s\":Infinity')"
  "neg_inf_tflops|d({**r, 'tflops': 1}).replace('\"tflops\":1', '\"tflops\":-Infinity')"
  "overflow|d({**r, 'tflops': 1}).replace('\"tflops\":1', '\"tflops\":1e999')"
  "array_row|json.dumps([r])"
  "string_median|d({**r, 'step_ms': {**r['step_ms'], 'median': str(r['step_ms']['median'])}})"
  "string_batch|d({**r, 'batch': '16'})"
  "missing_mode|d({k: v for k, v in r.items() if k != 'mode'})"
  "missing_step_ms|d({k: v for k, v in r.items() if k != 'step_ms'})"
  "env_array|d({**r, 'env': [r['env']]})"
  "trace_escape|d({**r, 'trace': '../../harness/sweep/claims.py'})"
  "experiment_path|d({**r, 'experiment': '../gpu_goal'})"
  "bool_batch|d({**r, 'batch': True})"
  "object_median|d({**r, 'step_ms': {**r['step_ms'], 'median': {'value': '1.0'}}})"
  "min_zero|d({**r, 'step_ms': {**r['step_ms'], 'min': 0}})"
  "byte_order_mark|chr(0xfeff) + d(r)"
  "override_a_list|d({**r, 'sweep': {**(r.get('sweep') or {}), 'hardware_override': ['h200-128g']}})"
  "grad_accum_a_string|d({**r, 'config': {**(r.get('config') or {}), 'grad_accum': '2'}})"
)
# refused NAME RC-WANT CMD...: exits RC, one stderr line names $F line 1, no traceback
refused() {
  local name=$1 want=$2 rc; shift 2
  "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?
  if [ "$rc" = "$want" ] && grep -q "$F:1: " "$tmp/err" && ! grep -q Traceback "$tmp/err"; then
    pass "$name"
  else
    fail "$name: exit $rc (want $want and $F:1 named, no traceback)"; head -c 600 "$tmp/err"; echo
  fi
}
mkdir -p "$tmp/sweeps" && cp experiments/sweeps/*.json "$tmp/sweeps/"
# the readers take the good copy (so a refusal below is the bad row's)
exits 0 "claims on the good copy" python3 -m harness.sweep.claims --results "$tmp/good" --sweeps "$tmp/sweeps"
exits 0 "export on the good copy" python3 -m harness.sweep.export --results "$tmp/good" --out "$tmp/plots" --sweeps "$tmp/sweeps"
i=0
for k in "${kinds[@]}"; do
  name=${k%%|*} expr=${k#*|}
  bad "$name" "$expr"
  d=$tmp/$name
  refused "$name: validate_rows" 2 python3 -m harness.resultslib.validate_rows "$d/$F"
  refused "$name: claims" 2 python3 -m harness.sweep.claims --results "$d" --sweeps "$tmp/sweeps"
  refused "$name: export" 2 python3 -m harness.sweep.export --results "$d" --out "$tmp/plots" --sweeps "$tmp/sweeps"
  # one more reader in turn (the row check is one function: the time goes to the kinds, not to every pair)
  case $((i++ % 4)) in
    0) refused "$name: docs --check" 2 python3 -m harness.sweep.docs --check --results "$d" --docs README.md ;;
    1) refused "$name: baselines gpu" 2 python3 -m harness.sweep.baselines gpu --from "$d" --out "$tmp/base" ;;
    2) refused "$name: peer_check" 2 python3 -m harness.sweep.peer_check --results "$d" --bin "$tmp/nobin" ;;
    3) refused "$name: sim_check" 2 python3 -m harness.sweep.sim_check --results "$d" --bin "$tmp/nobin" --no-write ;;
  esac
  mkdir -p "$tmp/in_$name" && cp "$d/$F" "$tmp/in_$name/"
  python3 -m harness.sweep.file_rows "$tmp/in_$name" --results "$tmp/filed_$name" --allow-dirty > /dev/null 2> "$tmp/err"
  rc=$?
  if [ "$rc" != 0 ] && grep -q "$F:1: " "$tmp/err" && ! grep -q Traceback "$tmp/err" && [ ! -e "$tmp/filed_$name/$F" ]; then
    pass "$name: file_rows refuses, nothing filed (exit $rc)"
  else
    fail "$name: file_rows: exit $rc"; head -c 600 "$tmp/err"; echo
  fi
done

# a sweep file is read as strictly as rows: a NaN or a repeated key is refused naming it
printf '{"schema": "megatrain.sweep/1", "experiment": "t_nan", "paths": ["cpu"], "defaults": {"model": "m.json", "mode": "projected", "hardware": "h100-128g", "batch": 2, "seq_len": 16, "precision": "paper", "steps": NaN, "warmup": 2}, "configs": [{}]}\n' > "$tmp/nan_sweep.json"
python3 -m harness.sweep.run --dry-run "$tmp/nan_sweep.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ ! -s "$tmp/out" ] && grep -q "nan_sweep.json" "$tmp/err" && pass "a sweep file with a NaN is refused (exit 2)" ||
  { fail "a sweep file with a NaN: exit $rc"; cat "$tmp/err"; }

# the side files' rows (cpu_optimizers.jsonl, peer_hooks.jsonl) are checked by their own
# schemas as they load: a string where the docs compute with a number is a line, not a traceback
rm -rf "$tmp/side" && cp -r "$tmp/good" "$tmp/side" && cp results/cpu_optimizers.jsonl results/peer_hooks.jsonl "$tmp/side/"
jq -c '.n_params |= tostring' results/cpu_optimizers.jsonl > "$tmp/side/cpu_optimizers.jsonl"
python3 -m harness.sweep.docs --check --results "$tmp/side" --docs README.md > /dev/null 2> "$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -q "cpu_optimizers.jsonl:1: n_params" "$tmp/err" && ! grep -q Traceback "$tmp/err" &&
  pass "a side file's string figure: docs --check names it (exit 2)" || { fail "side file string figure: exit $rc"; tail -3 "$tmp/err"; }

# the file around the rows: CRLF line ends and empty lines change no row (read as the same
# rows); a last row cut short by an interrupted write and bytes that are not UTF-8 are
# refused by every reader with the file and line, never a traceback
rm -rf "$tmp/crlf" && cp -r "$tmp/good" "$tmp/crlf" && { echo; sed 's/$/\r/' "$tmp/good/$F"; echo; } > "$tmp/crlf/$F"
exits 0 "CRLF line ends and empty lines: still read" python3 -m harness.sweep.claims --results "$tmp/crlf" --sweeps "$tmp/sweeps"
rm -rf "$tmp/cut" && cp -r "$tmp/good" "$tmp/cut" && head -c -100 "$tmp/good/$F" > "$tmp/cut/$F"
refused "a last row cut short: claims" 2 python3 -m harness.sweep.claims --results "$tmp/cut" --sweeps "$tmp/sweeps"
grep -q "cut short" "$tmp/err" && pass "a row cut short is named as one" || fail "a row cut short: $(cat "$tmp/err")"
rm -rf "$tmp/latin" && cp -r "$tmp/good" "$tmp/latin" && { printf '\xe9'; cat "$tmp/good/$F"; } > "$tmp/latin/$F"
refused "bytes that are not UTF-8: claims" 2 python3 -m harness.sweep.claims --results "$tmp/latin" --sweeps "$tmp/sweeps"
refused "bytes that are not UTF-8: export" 2 python3 -m harness.sweep.export --results "$tmp/latin" --out "$tmp/plots" --sweeps "$tmp/sweeps"

# ci/check_regression.sh runs the same check on its files first: a NaN or missing step time is
# refused, not compared
for name in nan_median inf_tokens overflow string_median missing_step_ms; do
  bash ci/check_regression.sh "$tmp/$name/$F" "$tmp/good/$F" > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ "$rc" = 2 ] && grep -q "$F:1: " "$tmp/err" && pass "$name: check_regression refuses it (exit 2)" ||
    { fail "$name: check_regression: exit $rc"; head -5 "$tmp/err"; }
done
# a results row with no step time (null: it failed or no longer fits) against a timed baseline
# is a FAIL, never passed as "no data"
jq -c '.step_ms = null | .tokens_per_s = null | .tflops = null | .mfu = null | .error = "it failed"' "$tmp/good/$F" > "$tmp/untimed.jsonl"
bash ci/check_regression.sh "$tmp/untimed.jsonl" "$tmp/good/$F" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ "$rc" = 1 ] && grep -q "^FAIL" "$tmp/out" && pass "check_regression: an untimed row against a timed baseline FAILs (exit 1)" ||
  { fail "check_regression untimed vs timed: exit $rc"; cat "$tmp/out" "$tmp/err" | head -5; }
bash ci/check_regression.sh "$tmp/good/$F" "$tmp/good/$F" > /dev/null 2>&1 && pass "check_regression: good rows still compared" ||
  fail "check_regression refused good rows"
# a peer's row goes through the same check before it is appended or printed
# (peer_results.emit_row): a NaN or an inverted range is the peer's error, nothing appended
for k in "float('nan')" "r['step_ms']['max'] * 2"; do
  rm -f "$tmp/peer_out.jsonl"
  python3 - "$tmp/good/$F" "$tmp/peer_out.jsonl" "$k" > "$tmp/out" 2> "$tmp/err" <<'EOF'
import json, sys
from baselines.peers import common
r = json.loads(open(sys.argv[1]).readline())
r["step_ms"]["median"] = eval(sys.argv[3], {"r": r})
common.main_guard(lambda: common.emit_row(sys.argv[2], r) or 0, "peer")
EOF
  rc=$?
  [ "$rc" = 1 ] && [ ! -e "$tmp/peer_out.jsonl" ] && [ ! -s "$tmp/out" ] && grep -q "row check refused" "$tmp/err" &&
    ! grep -q Traceback "$tmp/err" && pass "a peer's row with median $k is its error, not appended nor printed" ||
    { fail "peer emit_row median $k: exit $rc"; head -5 "$tmp/err"; }
done
python3 - "$tmp/good/$F" "$tmp/peer_out.jsonl" > /dev/null 2> "$tmp/err" <<'EOF'
import json, sys
from baselines.peers import common
common.main_guard(lambda: common.emit_row(sys.argv[2], json.loads(open(sys.argv[1]).readline())) or 0, "peer")
EOF
[ $? = 0 ] && python3 -m harness.resultslib.validate_rows "$tmp/peer_out.jsonl" && pass "a peer's good row is appended" ||
  { fail "a peer's good row"; cat "$tmp/err"; }

# The sweep never WRITES a row the check would refuse: a configuration whose row comes out
# with a NaN, an Infinity, an inverted range, a zero step time or a throughput that is not
# its tokens over its step time is filed as that configuration's error row (run.py, with
# run_config stubbed: no binary needed), and the file stays readable
for k in nan inf inverted zero absurd_tps auto_error; do
  rm -rf "$tmp/sw_$k" && mkdir -p "$tmp/sw_$k"
  python3 - "$tmp/sw_$k" "$k" > "$tmp/out" 2> "$tmp/err" <<'EOF'
import sys, types
from harness.sweep import common, run, sweeps
from harness.sweep.one_config import blank_row
out, kind = sys.argv[1], sys.argv[2]
s = sweeps.load("experiments/sweeps/" + ("gpu_auto.json" if kind == "auto_error" else "c2_cpu.json"))
cs = sweeps.expand(s)[:1]
env = dict({k: None for k in common.ENV_KEYS}, git_sha="0123456789ab", git_dirty=False)
def fake(R, exp, c, sweep_file=None, override=None):
    if kind == "auto_error":
        raise run.RunError("the binary failed")
    r = blank_row(exp, c, dict(env), sweep_file, override)
    med = {"nan": float("nan"), "inf": float("inf"), "inverted": 10.0, "zero": 0.0, "absurd_tps": 10.0}[kind]
    r["step_ms"] = {"median": med, "min": 12.0 if kind == "inverted" else 0.0 if kind == "zero" else 9.0, "max": 11.0, "n": 3}
    r["tokens_per_s"] = 1.0 if kind == "absurd_tps" else None
    return r
run.run_config = fake
R = types.SimpleNamespace(env=lambda hw: dict(env), deadline=None)
args = types.SimpleNamespace(out_dir=out, keys=None, only=None, force=True, hardware=None, skip_peers={})
s["_path"] = "experiments/sweeps/x.json"
print(run.run_sweep(R, s, cs, args))
EOF
  rc=$?
  f=$(ls "$tmp/sw_$k"/*.jsonl 2>/dev/null | head -1)
  if [ "$rc" = 0 ] && [ "$(cat "$tmp/out")" = 1 ] && [ -n "$f" ] && python3 -m harness.resultslib.validate_rows "$f" 2>> "$tmp/err" &&
     [ "$(jq -r '.step_ms' "$f")" = null ] && jq -e '.error | length > 0' "$f" > /dev/null; then
    pass "sweep writer: a $k row is filed as the configuration's error, the file stays readable"
  else
    fail "sweep writer: $k: exit $rc, $(cat "$tmp/out")"; head -c 800 "$tmp/err"; echo; [ -n "$f" ] && head -c 400 "$f"
  fi
done
finish
