#!/usr/bin/env bash
# harness/sweep/file_rows.py, the way a GPU campaign files its rows: rows a run wrote
# elsewhere (run.py --out-dir DIR, with MT_GIT_SHA/MT_GIT_DIRTY as a bundle without .git
# sets them) are merged into a results dir: same configuration replaced, rows of entries
# no longer in the sweep dropped, the sweep's order kept, traces and env files copied.
# Refused, with nothing filed: a row from a dirty or unknown tree, a row whose sweep entry
# is gone, a row with min > median, a row of an experiment no sweep names (unless
# --unswept), a row from another backend than its configuration's, a measured CUDA row
# without a GPU, a row replacing one of its configuration measured on another GPU (unless
# --replace-gpu); a GPU row not bound to the campaign call that made it (exit 2: no call id,
# no manifest of its call, a manifest saying it was not reached or not listing it, a dry
# run's call, a row made outside the pre-id call it names). Skips (77) without jq, python3 or
# the binaries.
. "$(dirname "$0")/lib.sh" jq python3 bins
mkdir -p "$tmp/sweeps"
S=$tmp/sweeps/t_file.json
cat > "$S" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_file", "paths": ["gpu"],
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "mode": "projected", "hardware": "h100-128g",
              "batch": 2, "seq_len": 16, "precision": "paper", "steps": 4, "warmup": 2},
 "configs": [{"schedule": "megatrain", "keep_trace": true}, {"schedule": "zero3"}, {"schedule": "naive"}]}
EOF
file_rows() { python3 -m harness.sweep.file_rows --sweeps "$tmp/sweeps" --results "$tmp/results" "$@"; }
# the "campaign": a clean run elsewhere, as a bundle without .git reports itself
MT_GIT_SHA=0123456789ab MT_GIT_DIRTY=0 python3 -m harness.sweep.run --out-dir "$tmp/out" --hardware h200-128g "$S" \
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
gkey=$(python3 -c "import sys; from harness.sweep import sweeps; sweeps.set_dir(sys.argv[1]); s = sweeps.by_experiment()['t_gpu']; print(sweeps.config_key(sweeps.expand(s)[0]))" "$tmp/sweeps")
gpu_row() { # gpu_row DIR GPU-NAME-JSON [CALL]: a megatrain row turned into t_gpu's measured CUDA row (of campaign call CALL)
  rm -rf "$1" && mkdir -p "$1"
  jq -c --arg k "$gkey" --argjson g "$2" --arg c "${3:-}" 'select(.system == "megatrain") | del(.trace) | .experiment = "t_gpu" |
    .config_key = $k | .backend = "cuda" | .mode = "measured" | .sweep.hardware_override = null | .env.gpu_name = $g |
    if $c != "" then .campaign_call = $c else . end' "$tmp/out/t_file.jsonl" > "$1/t_gpu.jsonl"
}
manifest() { # manifest PATH CALL CONFIGS-JSON UNREACHED-JSON: the manifest of a campaign call whose t_gpu step made CONFIGS
  jq -n --arg c "$2" --argjson k "$3" --argjson u "$4" '{schema: "megatrain.gpu_campaign/1", part: "T", call_id: $c,
    dry_run: false, steps: [{name: "t_gpu", kind: "sweep", status: "ok", configs: $k, unreached: $u}]}' > "$1"
}
gpu_row "$tmp/g0" null
file_rows "$tmp/g0" 2> "$tmp/g0.err"
[ $? = 1 ] && grep -q "names no GPU" "$tmp/g0.err" && [ ! -e "$tmp/results/t_gpu.jsonl" ] &&
  pass "refused: a measured CUDA row from a machine without a GPU" || { fail "no-GPU row"; cat "$tmp/g0.err"; }
# rows bound to their campaign call: a GPU row is filed only with the manifest of the call that made it,
# which lists its configuration as made; each refusal exits 2 and files nothing
unbound() { # unbound NAME DIR PATTERN [file_rows options]
  local name=$1 d=$2 pat=$3; shift 3
  file_rows "$d" "$@" 2> "$tmp/ub.err"; local rc=$?
  [ "$rc" = 2 ] && grep -q -- "$pat" "$tmp/ub.err" && grep -q "nothing filed" "$tmp/ub.err" && [ ! -e "$tmp/results/t_gpu.jsonl" ] &&
    pass "refused (exit 2): $name" || { fail "$name (exit $rc)"; cat "$tmp/ub.err"; }
}
gpu_row "$tmp/b0" '"NVIDIA H200"'
unbound "a GPU row without a campaign call id" "$tmp/b0" "no campaign_call"
gpu_row "$tmp/b1" '"NVIDIA H200"' T-20261128T000000Z-aaaaaa
unbound "a GPU row whose call's manifest is absent" "$tmp/b1" "no manifest of its campaign call T-20261128T000000Z-aaaaaa"
manifest "$tmp/b1/T-manifest.json" T-20261128T000000Z-bbbbbb "[\"$gkey\"]" null
unbound "a GPU row beside another call's manifest" "$tmp/b1" "no manifest of its campaign call"
manifest "$tmp/b1/T-manifest.json" T-20261128T000000Z-aaaaaa '[]' "[{\"label\": \"t_gpu megatrain\", \"config_key\": \"$gkey\", \"reason\": \"no time left\"}]"
unbound "a row whose manifest says its configuration was not reached" "$tmp/b1" "says its configuration was not reached (t_gpu megatrain: no time left)"
manifest "$tmp/b1/T-manifest.json" T-20261128T000000Z-aaaaaa '["0123456789abcdef"]' null
unbound "a row whose configuration its manifest does not list" "$tmp/b1" "does not list its configuration $gkey"
manifest "$tmp/b1/T-manifest.json" T-20261128T000000Z-aaaaaa "[\"$gkey\"]" null
jq '.dry_run = true' "$tmp/b1/T-manifest.json" > "$tmp/dry-manifest.json"
rm "$tmp/b1/T-manifest.json"
unbound "a row of a dry run's call" "$tmp/b1" "was a dry run" --manifest "$tmp/dry-manifest.json"
manifest "$tmp/call1-manifest.json" T-20261128T000000Z-aaaaaa "[\"$gkey\"]" null
gpu_row "$tmp/g1" '"NVIDIA H200"' T-20261128T000000Z-aaaaaa
file_rows "$tmp/g1" --manifest "$tmp/call1-manifest.json" 2> "$tmp/g1.err" &&
  [ "$(jq -r .campaign_call "$tmp/results/t_gpu.jsonl")" = T-20261128T000000Z-aaaaaa ] &&
  pass "a measured CUDA row bound to its call's manifest is filed" || { fail "H200 row"; cat "$tmp/g1.err"; }
# a GPU row already filed as it is passes unchanged without its manifest (committed results/ are
# checked this way); changed, it needs the manifest again
rm -rf "$tmp/same" && mkdir -p "$tmp/same" && cp "$tmp/results/t_gpu.jsonl" "$tmp/same/"
file_rows "$tmp/same" --dry-run 2> "$tmp/same.err" && pass "a GPU row filed as it is passes without its manifest" ||
  { fail "the filed row again"; cat "$tmp/same.err"; }
jq -c '.wall_s = 12345' "$tmp/results/t_gpu.jsonl" > "$tmp/same/t_gpu.jsonl"
file_rows "$tmp/same" --dry-run 2> "$tmp/same.err"
[ $? = 2 ] && grep -q "no manifest of its campaign call" "$tmp/same.err" && pass "refused (exit 2): that row changed, without its manifest" ||
  { fail "a changed filed row without its manifest"; cat "$tmp/same.err"; }
# a manifest filed before calls had ids (results/campaign/<gpu>-<part>-<utc>-manifest.json): the row's
# tree and env time must fall inside that call
mkdir -p "$tmp/results/campaign"
jq -n '{part: "T", dry_run: false, utc: "2026-11-26T03:02:25Z", seconds: 454.2, git_sha: "0123456789ab",
        steps: [{name: "t_gpu", kind: "sweep", status: "ok", unreached: null}]}' > "$tmp/results/campaign/h200-T-20261126T030225Z-manifest.json"
old_call() { rm -rf "$1" && mkdir -p "$1" && jq -c --arg u "$2" 'del(.campaign_call) | .campaign_call = "h200-T-20261126T030225Z" |
  .env.utc = $u | .env.git_sha = "0123456789ab" | .step_ms.median = .step_ms.min' "$tmp/results/t_gpu.jsonl" > "$1/t_gpu.jsonl"; }
old_call "$tmp/o1" 2026-11-26T03:04:51Z
file_rows "$tmp/o1" --dry-run 2> "$tmp/o1.err"
[ $? = 2 ] && grep -q "not made by call h200-T-20261126T030225Z" "$tmp/o1.err" &&
  pass "refused (exit 2): a row made after the old call it names" || { fail "old call, after"; cat "$tmp/o1.err"; }
old_call "$tmp/o2" 2026-11-26T02:56:20Z
file_rows "$tmp/o2" --dry-run 2> "$tmp/o2.err" && pass "a row made inside the old call it names is accepted" ||
  { fail "old call, inside"; cat "$tmp/o2.err"; }
rm -rf "$tmp/results/campaign"
gpu_row "$tmp/g2" '"NVIDIA H100 80GB HBM3"' T-20261128T000000Z-cccccc
manifest "$tmp/g2/T-manifest.json" T-20261128T000000Z-cccccc "[\"$gkey\"]" null
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
