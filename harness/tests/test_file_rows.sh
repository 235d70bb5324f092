#!/usr/bin/env bash
# harness/sweep/file_rows.py, the way a GPU campaign files its rows: rows a run wrote
# elsewhere (run.py --out-dir DIR, with MT_GIT_SHA/MT_GIT_DIRTY as a bundle without .git
# sets them) are merged into a results dir: same configuration replaced, rows of entries
# no longer in the sweep dropped, the sweep's order kept, traces and env files copied.
# Refused, with nothing filed: a row from a dirty or unknown tree, a row whose sweep entry
# is gone, a row with min > median, a row of an experiment no sweep names (unless
# --unswept), a row from another backend than its configuration's, a measured CUDA row
# without a GPU, a row replacing one of its configuration measured on another GPU (unless
# --replace-gpu). Skips (77) without jq, python3 or the binaries.
. "$(dirname "$0")/lib.sh" jq python3 bins
mkdir -p "$tmp/sweeps"
S=$tmp/sweeps/t_file.json
cat > "$S" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_file", "paths": ["gpu"],
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "mode": "projected", "hardware": "h100-128g",
              "batch": 2, "seq_len": 16, "precision": "paper", "steps": 4, "warmup": 2},
 "configs": [{"schedule": "megatrain", "keep_trace": true}, {"schedule": "zero3"}, {"schedule": "naive"}]}
EOF
file_rows() { python3 harness/sweep/file_rows.py --sweeps "$tmp/sweeps" --results "$tmp/results" "$@"; }
# the "campaign": a clean run elsewhere, as a bundle without .git reports itself
MT_GIT_SHA=0123456789ab MT_GIT_DIRTY=0 python3 harness/sweep/run.py --out-dir "$tmp/out" --hardware h200-128g "$S" \
  2> "$tmp/run.err" || { fail "run exit $?"; cat "$tmp/run.err"; }
MT_GIT_SHA=0123456789ab MT_GIT_DIRTY=0 "$MT_BIN/mt-env" > "$tmp/out/env_gpu.json"
# results/ already holds a row of an entry that is gone and an old row of one still there
mkdir -p "$tmp/results"
jq -c 'select(.system == "zero3") | .step_ms.median = 1 | .step_ms.min = 1 | .step_ms.max = 1' "$tmp/out/t_file.jsonl" > "$tmp/results/t_file.jsonl"
jq -c 'select(.system == "naive") | .config_key = "0000000000000000"' "$tmp/out/t_file.jsonl" >> "$tmp/results/t_file.jsonl"

file_rows "$tmp/out" 2> "$tmp/f1.err"; rc=$?
f=$tmp/results/t_file.jsonl
if [ "$rc" = 0 ] && [ "$(jq -s -c 'map(.system)' "$f")" = '["megatrain","zero3","naive"]' ] &&
   [ "$(jq -s '[.[] | select(.step_ms.median == 1)] | length' "$f")" = 0 ] &&
   [ "$(jq -s -c '[.[].sweep.hardware_override] | unique' "$f")" = '["h200-128g"]' ] &&
   grep -q "1 of entries no longer in the sweep dropped" "$tmp/f1.err"; then
  pass "filed: same configuration replaced, the removed entry's row dropped, the sweep's order kept"
else
  fail "filing (exit $rc)"; cat "$tmp/f1.err"; jq -c '{system, config_key, m: .step_ms.median}' "$f"
fi
tr=$(jq -r 'select(.trace) | .trace' "$f")
[ -n "$tr" ] && [ -s "$tmp/results/$tr" ] && [ -s "$tmp/results/env_gpu.json" ] && pass "trace and env file copied" ||
  fail "trace '$tr' / env file not copied"

# refusals: nothing is filed when one row fails
refuse() { # refuse NAME PATTERN JQ-EDIT [file_rows options]
  local name=$1 pat=$2 edit=$3; shift 3
  rm -rf "$tmp/bad" && mkdir -p "$tmp/bad" && cp "$tmp/out/t_file.jsonl" "$tmp/bad/"
  jq -c "if .system == \"zero3\" then $edit else . end" "$tmp/out/t_file.jsonl" > "$tmp/bad/t_file.jsonl"
  cp "$f" "$tmp/before.jsonl"
  file_rows "$tmp/bad" "$@" 2> "$tmp/bad.err"; local rc=$?
  if [ "$rc" = 1 ] && grep -q -- "$pat" "$tmp/bad.err" && grep -q "nothing filed" "$tmp/bad.err" && cmp -s "$f" "$tmp/before.jsonl"; then
    pass "refused: $name"
  else
    fail "$name (exit $rc)"; cat "$tmp/bad.err"
  fi
}
refuse "a row from a dirty tree" "dirty tree" '.env.git_dirty = true'
refuse "a row from an unknown tree" "unknown tree" '.env.git_dirty = null'
refuse "a row whose sweep entry is gone" "is not a configuration of" '.config_key = "0123456789abcdef"'
refuse "min > median" "does not hold" '.step_ms.min = .step_ms.median * 2'
refuse "a missing docs/DESIGN.md#results key" "missing key(s) h2d_gbps" 'del(.h2d_gbps)'
refuse "an extrapolated row without its error" "without step_ms.err_frac" '.mode = "extrapolated"'
refuse "an experiment no sweep names" "no sweep file names" '.experiment = "t_nosweep"'
refuse "a row from another backend than its configuration's" "but its configuration runs on" '.backend = "cpu"'
# a measured CUDA configuration: its rows need a GPU, and a row from another GPU does not replace
# a filed one unless --replace-gpu says so
cat > "$tmp/sweeps/t_gpu.json" <<'EOF2'
{"schema": "megatrain.sweep/1", "experiment": "t_gpu", "paths": ["gpu"],
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "mode": "measured", "backend": "cuda",
              "batch": 2, "seq_len": 16, "precision": "paper", "steps": 4, "warmup": 2},
 "configs": [{"schedule": "megatrain"}]}
EOF2
gkey=$(cd harness/sweep && python3 -c "import sweeps, sys; sweeps.set_dir(sys.argv[1]); s = sweeps.by_experiment()['t_gpu']; print(sweeps.config_key(sweeps.expand(s)[0]))" "$tmp/sweeps")
gpu_row() { # gpu_row DIR GPU-NAME-JSON: a megatrain row turned into t_gpu's measured CUDA row
  rm -rf "$1" && mkdir -p "$1"
  jq -c --arg k "$gkey" --argjson g "$2" 'select(.system == "megatrain") | del(.trace) | .experiment = "t_gpu" |
    .config_key = $k | .backend = "cuda" | .mode = "measured" | .sweep.hardware_override = null | .env.gpu_name = $g'     "$tmp/out/t_file.jsonl" > "$1/t_gpu.jsonl"
}
gpu_row "$tmp/g0" null
file_rows "$tmp/g0" 2> "$tmp/g0.err"
[ $? = 1 ] && grep -q "names no GPU" "$tmp/g0.err" && [ ! -e "$tmp/results/t_gpu.jsonl" ] &&
  pass "refused: a measured CUDA row from a machine without a GPU" || { fail "no-GPU row"; cat "$tmp/g0.err"; }
gpu_row "$tmp/g1" '"NVIDIA H200"'
file_rows "$tmp/g1" 2> "$tmp/g1.err" && pass "a measured CUDA row from a GPU machine is filed" || { fail "H200 row"; cat "$tmp/g1.err"; }
gpu_row "$tmp/g2" '"NVIDIA H100 80GB HBM3"'
file_rows "$tmp/g2" 2> "$tmp/g2.err"
[ $? = 1 ] && grep -q "would replace the row measured on NVIDIA H200 with one from NVIDIA H100" "$tmp/g2.err" &&
  [ "$(jq -r .env.gpu_name "$tmp/results/t_gpu.jsonl")" = "NVIDIA H200" ] &&
  pass "refused: an H100 row replacing the filed H200 row of its configuration" || { fail "other-GPU row"; cat "$tmp/g2.err"; }
file_rows "$tmp/g2" --replace-gpu 2> "$tmp/g3.err" && [ "$(jq -r .env.gpu_name "$tmp/results/t_gpu.jsonl")" = "NVIDIA H100 80GB HBM3" ] &&
  pass "--replace-gpu lets it replace" || { fail "--replace-gpu"; cat "$tmp/g3.err"; }
# --allow-dirty takes a dirty row; --unswept a row of an experiment without a sweep
rm -rf "$tmp/d" && mkdir -p "$tmp/d" && jq -c '.env.git_dirty = true' "$tmp/out/t_file.jsonl" > "$tmp/d/t_file.jsonl"
cp -r "$tmp/out/traces" "$tmp/d/"
file_rows "$tmp/d" --allow-dirty 2> "$tmp/d.err" && pass "--allow-dirty files a dirty row" || { fail "--allow-dirty"; cat "$tmp/d.err"; }
rm -rf "$tmp/u" && mkdir -p "$tmp/u" && jq -c 'select(.system == "zero3") | .experiment = "t_peer"' "$tmp/out/t_file.jsonl" > "$tmp/u/t_peer.jsonl"
file_rows "$tmp/u" --unswept 2> "$tmp/u.err" && [ "$(grep -c . "$tmp/results/t_peer.jsonl")" = 1 ] &&
  pass "--unswept files a row of an experiment without a sweep" || { fail "--unswept"; cat "$tmp/u.err"; }

finish
