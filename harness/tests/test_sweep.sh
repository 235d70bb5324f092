#!/usr/bin/env bash
# harness/sweep/run.py on a tiny config (--backend cpu, 4 steps) in a temp dir:
# every DESIGN.md results key with the right type, mode measured, resumability (a
# second run adds nothing), an error row for a bad configuration (and exit 1), depth
# truncation, and an extrapolated row. Skips (77) without jq, python3 or the binaries.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
command -v jq >/dev/null || { echo "skipped: jq not installed"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: python3 not installed"; exit 77; }
export MT_BIN=${MT_BIN:-$(pwd)/build/bin}
[ -x "$MT_BIN/megatrain" ] && [ -x "$MT_BIN/mt-env" ] || { echo "skipped: no $MT_BIN/megatrain or mt-env"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
pass() { echo "ok   $*"; }

cat > "$tmp/ok.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_sweep",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "cpu", "mode": "measured",
              "batch": 2, "seq_len": 16, "precision": "fp32", "steps": 4, "warmup": 2},
 "matrix": {"schedule": ["megatrain", "zero3"]}}
EOF
out=$tmp/results/t_sweep.jsonl
python3 harness/sweep/run.py --out-dir "$tmp/results" "$tmp/ok.json" 2> "$tmp/err1" || { fail "first run exit $?"; cat "$tmp/err1"; }
n=$(grep -c . "$out" 2>/dev/null || echo 0)
[ "$n" = 2 ] && pass "2 rows written" || fail "want 2 rows, got $n"

# Every DESIGN.md key, with its type; mode measured; env with its 14 keys.
check='
  def num: type == "number";
  def numnull: type == "number" or type == "null";
  (.schema == "megatrain.results/1") and (.experiment == "t_sweep") and (.system | type == "string")
  and (.mode == "measured") and (.model | type == "string") and (.params | num) and (.params > 0)
  and (.layers_run == 5) and (.layers_model == 5) and (.batch == 2) and (.seq_len == 16)
  and (.precision == "fp32")
  and (.step_ms | type == "object") and (.step_ms.median | num) and (.step_ms.min | num) and (.step_ms.max | num)
  and (.step_ms.min <= .step_ms.median) and (.step_ms.median <= .step_ms.max)
  and (.tokens_per_s | num) and (.tflops | num) and (.mfu == null)
  and (.gpu_busy_frac | numnull) and (.h2d_gbps | numnull) and (.peak_gpu_bytes | numnull)
  and (.peak_host_bytes | num)
  and (.env | type == "object")
  and ([.env | has("git_sha","git_dirty","gpu_name","gpu_mem_bytes","driver","cuda","host_mem_bytes",
                   "cpu_model","cpu_cores","numa_nodes","gpu_numa_node","pcie_gbps","hardware_profile","utc")] | all)
  and (.env.hardware_profile == null) and (has("error") | not)
  and (.tokens_per_s as $t | ($t - (.batch * .seq_len) / (.step_ms.median / 1000)) | fabs < 1e-6 * $t)
  and (.tflops as $f | ($f - 6 * .params * .batch * .seq_len / (.step_ms.median / 1000) / 1e12) | fabs < 1e-6 * $f)'
if jq -e "$check" "$out" >/dev/null 2>&1 && [ "$(jq -s 'map(select('"$check"')) | length' "$out")" = 2 ]; then
  pass "schema: every key present with its type, mode measured, tokens_per_s and tflops consistent"
else
  fail "schema check"; jq -c '{system, mode, params, layers_run, step_ms, tokens_per_s, tflops, mfu, env: (.env | keys)}' "$out"
fi
[ "$(jq -s 'map(.system) | sort | join(",")' "$out")" = '"megatrain,zero3"' ] && pass "one row per schedule" || fail "systems"

# Resumable: the second run skips both configurations and adds nothing.
python3 harness/sweep/run.py --out-dir "$tmp/results" "$tmp/ok.json" 2> "$tmp/err2" || fail "second run exit $?"
n2=$(grep -c . "$out")
[ "$n2" = 2 ] && grep -q "2 already in" "$tmp/err2" && pass "resumable: second run adds nothing" || { fail "resume: $n2 rows"; cat "$tmp/err2"; }
# --force replaces the rows instead of appending.
python3 harness/sweep/run.py --force --out-dir "$tmp/results" "$tmp/ok.json" 2> "$tmp/err3" || fail "--force run exit $?"
[ "$(grep -c . "$out")" = 2 ] && pass "--force replaces rows" || fail "--force: $(grep -c . "$out") rows"

# A bad configuration: an error row (mode still set), the sweep goes on, exit status 1.
cat > "$tmp/bad.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_bad",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "cpu", "mode": "measured",
              "batch": 2, "seq_len": 16, "precision": "fp32", "steps": 4, "warmup": 2},
 "configs": [{"args": ["--no-such-option"]}, {"layers": 2}]}
EOF
python3 harness/sweep/run.py --out-dir "$tmp/results" "$tmp/bad.json" 2> "$tmp/err4"; rc=$?
bad=$tmp/results/t_bad.jsonl
[ "$rc" = 1 ] && pass "a failing configuration gives exit 1" || fail "bad sweep exit $rc, want 1"
if jq -s -e '(.[0].error | type == "string") and (.[0].mode == "measured") and (.[0].step_ms == null)
             and (.[1] | has("error") | not) and (.[1].layers_run == 2) and (.[1].layers_model == 5)' "$bad" >/dev/null; then
  pass "error row recorded, next configuration ran (depth truncated 5 -> 2 layers)"
else
  fail "error row / truncation"; cat "$bad"; cat "$tmp/err4"
fi

# Extrapolated: fitted over 1 and 2 layers, reported at the full depth (5).
cat > "$tmp/ex.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_ex",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "cpu", "mode": "extrapolated",
              "layers_fit": [1, 2], "batch": 2, "seq_len": 16, "precision": "fp32", "steps": 4, "warmup": 2}}
EOF
python3 harness/sweep/run.py --out-dir "$tmp/results" "$tmp/ex.json" 2> "$tmp/err5" || fail "extrapolated run exit $?"
if jq -e '(.mode == "extrapolated") and (.layers_run == 5) and (.layers_model == 5) and (.fit.depths == [1,2])
          and (.step_ms.median | type == "number") and (.params | type == "number")' "$tmp/results/t_ex.jsonl" >/dev/null; then
  pass "extrapolated row at the full depth with its fit"
else
  fail "extrapolated row"; cat "$tmp/results/t_ex.jsonl" "$tmp/err5"
fi

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
