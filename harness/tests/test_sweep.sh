#!/usr/bin/env bash
# harness/sweep/run.py on a tiny config in a temp dir, every row kind: measured (cpu),
# extrapolated (fit + held-out depth), projected (sim) and projected (plan), a row that
# does not fit, an error row (the no-argument default run's row is checked in the committed
# results by test_results_files.sh: 150 steps are too slow here). For each: every docs/DESIGN.md#results
# results key with its type, and where step_ms is set min <= median <= max (an
# extrapolated row: median -/+ its held-out error). Then the file belongs to its sweep:
# resumable, --force replaces, a removed entry's row goes (also with --only), a row of
# another experiment goes. Skips (77) without jq, python3 or the binaries.
. "$(dirname "$0")/lib.sh" jq python3 bins
R=$tmp/results
run() { python3 -m harness.sweep.run --out-dir "$R" "$@"; }

# The checks every row of every kind must pass (a row that did not run has step_ms null).
common='
  def num: type == "number";
  def numnull: type == "number" or type == "null";
  (.schema == "megatrain.results/1") and (.experiment | type == "string") and (.system | type == "string")
  and (.mode | IN("measured", "extrapolated", "projected")) and (.model | type == "string")
  and (.params | numnull) and (.layers_run | numnull) and (.layers_model | numnull)
  and (.batch | numnull) and (.seq_len | numnull) and (.precision | type == "string" or . == null)
  and (.tokens_per_s | numnull) and (.tflops | numnull) and (.mfu | numnull)
  and (.gpu_busy_frac | numnull) and (.h2d_gbps | numnull) and (.peak_gpu_bytes | numnull)
  and (.peak_host_bytes | numnull) and (.env | type == "object")
  and ([.env | has("git_sha","git_dirty","gpu_name","gpu_mem_bytes","driver","cuda","host_mem_bytes",
                   "cpu_model","cpu_cores","numa_nodes","gpu_numa_node","pcie_gbps","hardware_profile","utc")] | all)
  and (.config_key | type == "string") and (.sweep.file | type == "string")
  and (.host_load == null or ((.host_load | length) == 2 and (.host_load[0] | num)))
  and (.step_ms == null or ((.step_ms.median | num) and (.step_ms.min | num) and (.step_ms.max | num)
       and .step_ms.min <= .step_ms.median and .step_ms.median <= .step_ms.max and .step_ms.min >= 0))
  and (.step_ms == null or .tokens_per_s == null
       or ((.tokens_per_s - .tokens / (.step_ms.median / 1000)) | fabs) < 1e-6 * .tokens_per_s)
  and (.step_ms == null or .tflops == null
       or ((.tflops - 6 * .params * .tokens / (.step_ms.median / 1000) / 1e12) | fabs) < 1e-6 * .tflops)'
# every_row NAME FILE EXTRA-JQ: each row of FILE passes the common checks and EXTRA
every_row() {
  local n bad
  n=$(grep -c . "$2" 2>/dev/null || echo 0)
  bad=$(jq -c "select(($common and ($3)) | not) | {experiment, system, mode, step_ms, error}" "$2" 2>&1)
  if [ "$n" -gt 0 ] && [ -z "$bad" ]; then pass "$1 ($n rows)"; else fail "$1 ($n rows)"; echo "$bad" | head -5; fi
}

# ---- measured: two schedules on the cpu backend
cat > "$tmp/ok.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_sweep",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "cpu", "mode": "measured",
              "batch": 2, "seq_len": 16, "precision": "fp32", "steps": 5, "warmup": 2},
 "matrix": {"schedule": ["megatrain", "zero3"]}}
EOF
out=$R/t_sweep.jsonl
run "$tmp/ok.json" 2> "$tmp/err1" || { fail "first run exit $?"; cat "$tmp/err1"; }
every_row "measured rows" "$out" '
  (.mode == "measured") and (.backend == "cpu") and (.params > 0) and (.layers_run == 5) and (.layers_model == 5)
  and (.batch == 2) and (.seq_len == 16) and (.precision == "fp32") and (.mfu == null) and (.fits == true)
  and (.step_ms.n == 2) and (.step_ms_all | length == 5) and (.step_ms_last == .step_ms_all[4])
  and (.step_ms as $s | [.step_ms_all[2:4][] | . >= $s.min and . <= $s.max] | all)
  and (.loss_first | type == "number") and (.peak_host_bytes > 0) and (has("error") | not)
  and (.timing_rule | startswith("steady-window/")) and (.timing == "ratio")
  and (.model_flops_per_token > 0) and (.model_tflops == .model_flops_per_token * .tokens / (.step_ms.median / 1e3) / 1e12)
  and (.sweep.file | endswith("ok.json")) and (.sweep.hardware_override == null)'
[ "$(jq -s -c 'map(.system)' "$out")" = '["megatrain","zero3"]' ] && pass "one row per schedule, in the sweep's order" ||
  fail "systems: $(jq -s -c 'map(.system)' "$out")"

# Resumable: the second run skips both configurations and adds nothing; --force replaces.
run "$tmp/ok.json" 2> "$tmp/err2" || fail "second run exit $?"
[ "$(grep -c . "$out")" = 2 ] && grep -q "2 already in" "$tmp/err2" && pass "resumable: second run adds nothing" ||
  { fail "resume: $(grep -c . "$out") rows"; cat "$tmp/err2"; }
utc0=$(jq -s -c 'map(.wall_s)' "$out")
run --force "$tmp/ok.json" 2> "$tmp/err3" || fail "--force run exit $?"
[ "$(grep -c . "$out")" = 2 ] && [ "$(jq -s -c 'map(.wall_s)' "$out")" != "$utc0" ] && pass "--force replaces rows" ||
  fail "--force: $(grep -c . "$out") rows"

# The sweep owns its file: a row of another experiment and a row of an entry that is
# gone are dropped, even by a run that re-runs nothing (--only matching nothing).
jq -c '.experiment = "other"' "$out" | head -1 >> "$out"
jq -c '.config_key = "0000000000000000"' "$out" | head -1 >> "$out"
run --only "no such label" "$tmp/ok.json" 2> "$tmp/err4" || fail "--only run exit $?"
[ "$(grep -c . "$out")" = 2 ] && grep -q "2 row(s) of entries no longer in the sweep dropped" "$tmp/err4" &&
  pass "rows of other experiments and removed entries are dropped" || { fail "ownership"; cat "$tmp/err4"; }
jq '.matrix.schedule = ["zero3"]' "$tmp/ok.json" > "$tmp/ok1.json"
run "$tmp/ok1.json" 2> "$tmp/err5" || fail "shrunk sweep exit $?"
[ "$(jq -s -c 'map(.system)' "$out")" = '["zero3"]' ] && pass "an entry removed from the sweep loses its row" ||
  fail "after removing megatrain: $(jq -s -c 'map(.system)' "$out")"

# ---- a bad configuration: an error row (mode still set), the sweep goes on, exit 1
cat > "$tmp/bad.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_bad",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "cpu", "mode": "measured",
              "batch": 2, "seq_len": 16, "precision": "fp32", "steps": 4, "warmup": 2},
 "configs": [{"args": ["--no-such-option"]}, {"layers": 2}]}
EOF
run "$tmp/bad.json" 2> "$tmp/err6"; rc=$?
[ "$rc" = 1 ] && pass "a failing configuration gives exit 1" || fail "bad sweep exit $rc, want 1"
every_row "error row and truncated row" "$R/t_bad.jsonl" 'true'
if jq -s -e '(.[0].error | type == "string") and (.[0].mode == "measured") and (.[0].step_ms == null)
             and (.[1] | has("error") | not) and (.[1].layers_run == 2) and (.[1].layers_model == 5)' "$R/t_bad.jsonl" >/dev/null; then
  pass "error row recorded, next configuration ran (depth truncated 5 -> 2 layers)"
else
  fail "error row / truncation"; cat "$R/t_bad.jsonl"
fi

# ---- extrapolated: fit on 1 and 2 layers, 3 held out, reported at the full depth (5). The sim
# backend times the runs: the fit's arithmetic is under test, and wall-clock noise on a loaded
# 2-core CI machine can make a 1-layer run slower than a 2-layer one (no extrapolation).
cat > "$tmp/ex.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_ex",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "sim", "hardware": "gh200-480g", "mode": "extrapolated",
              "layers_fit": [1, 2], "layers_holdout": 3, "batch": 4, "seq_len": 64, "precision": "fp32",
              "steps": 5, "warmup": 2}}
EOF
run "$tmp/ex.json" 2> "$tmp/err7" || fail "extrapolated run exit $?"
every_row "extrapolated row: a median and its held-out error band" "$R/t_ex.jsonl" '
  (.mode == "extrapolated") and (.layers_run == 5) and (.layers_model == 5) and (.fit.depths == [1,2])
  and (.fit.holdout.depth == 3) and (.fit.holdout.measured_ms > 0) and ((.fit.holdout.lever * 1.5 - 3.5) | fabs) < 1e-9
  and (.step_ms.err_frac >= .fit.noise_frac) and (.step_ms.err_frac == .fit.err_frac)
  and ((.step_ms.median - (.fit.intercept_ms + 5 * .fit.per_layer_ms)) | fabs) < 1e-9 * .step_ms.median
  and ((.step_ms.max - .step_ms.median * (1 + .step_ms.err_frac)) | fabs) < 1e-9 * .step_ms.max
  and (if .fit.bar_too_wide then .step_ms.min > 0 and .step_ms.min <= .step_ms.median
       else .step_ms.min == .step_ms.median * (1 - .step_ms.err_frac) end)
  and ((.fit.holdout.predicted_ms - (.fit.intercept_ms + 3 * .fit.per_layer_ms)) | fabs) < 1e-9 * .fit.holdout.predicted_ms
  and (.fits == null) and (.params > 0)'
# interleaved rounds with the full depth measured beside the fit (the CPU check's form): every
# depth runs once per round, the rounds' predictions and the check are recorded, and on the
# deterministic sim the rounds agree, so the error bar gains nothing from them.
jq '.experiment = "t_ex2" | .defaults.rounds = 2 | .defaults.layers_check = 5' "$tmp/ex.json" > "$tmp/ex2.json"
run "$tmp/ex2.json" 2> "$tmp/err7b" || fail "extrapolated (rounds, check) run exit $?"
every_row "extrapolated row over 2 interleaved rounds with its full-depth check" "$R/t_ex2.jsonl" '
  (.fit.rounds == 2) and (.fit.round_predicted_ms | length == 2) and (.fit.round_spread_frac < 1e-9)
  and (.fit.check.depth == 5) and (.fit.check.measured_ms > 0)
  and ((.fit.check.err_frac - (.fit.check.predicted_ms / .fit.check.measured_ms - 1)) | fabs) < 1e-12
  and ((.fit.check.predicted_ms - .step_ms.median) | fabs) < 1e-9 * .step_ms.median
  and (.step_ms.n == 4) and (.step_ms.err_frac >= .fit.noise_frac)'
for bad in '.defaults.layers_check = 2' '.defaults.layers_check = 3' '.defaults.rounds = 0' \
           '.defaults.mode = "measured" | .defaults.rounds = 2'; do
  jq "$bad" "$tmp/ex2.json" > "$tmp/ex_bad.json"
  run "$tmp/ex_bad.json" 2> "$tmp/err9"; rc=$?
  [ "$rc" = 2 ] && grep -q "rounds\|layers_check" "$tmp/err9" && pass "refused before running: $bad" ||
    fail "sweep with $bad: exit $rc, want 2"
done
# without a held-out depth the sweep is refused before anything runs
jq 'del(.defaults.layers_holdout)' "$tmp/ex.json" > "$tmp/ex_nohold.json"
run "$tmp/ex_nohold.json" 2> "$tmp/err8"; rc=$?
[ "$rc" = 2 ] && grep -q "layers_holdout" "$tmp/err8" && pass "extrapolated without a held-out depth is refused" ||
  fail "no-holdout sweep: exit $rc"

# ---- projected: the sim backend (and plan), the plan alone, and a configuration that does not fit
cat > "$tmp/pr.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_pr",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "hardware": "gh200-480g",
              "batch": 2, "seq_len": 16, "precision": "paper", "steps": 5, "warmup": 2},
 "configs": [{"mode": "projected"}, {"mode": "projected-plan"},
             {"mode": "projected", "model": "experiments/models/dense-120b.json", "hardware": "rtx4090-256g",
              "batch": 1, "seq_len": 1024}]}
EOF
run "$tmp/pr.json" 2> "$tmp/err9" || { fail "projected run exit $?"; cat "$tmp/err9"; }
every_row "projected rows (sim, plan, does not fit)" "$R/t_pr.jsonl" '
  (.mode == "projected") and (.hardware | IN("gh200-480g", "rtx4090-256g")) and (.env.hardware_profile == .hardware)
  and (.plan | type == "object") and (.fits | type == "boolean")'
if jq -s -e '(.[0].backend == "sim") and (.[0].fits == true) and (.[0].step_ms.n == 2) and (.[0].mfu > 0)
             and ((.[0].step_ms.max - .[0].step_ms.min) <= 1e-9 * .[0].step_ms.min)
             and (.[1].backend == "plan") and (.[1].step_ms.n == 1) and (.[1].gpu_busy_source == "plan")
             and (.[2].fits == false) and (.[2].step_ms == null) and (.[2].note | test("does not fit"))' \
     "$R/t_pr.jsonl" >/dev/null; then
  pass "sim row (deterministic steady state, to the rounding of its virtual clock), plan row, fits:false row"
else
  fail "projected rows"; jq -c '{backend, fits, step_ms, note}' "$R/t_pr.jsonl"
fi
# what the sim row rests on (cost_sources.py): gh200-480g is datasheet and assumed figures only
jq -s -e '(.[0].cost_sources.datasheet | index("gpu.peak_tflops.bf16")) and (.[0].cost_sources.measured == null)
          and (.[0].cost_sources.assumed | index("model/hardware_profile.h MT_SIM_HBM_EFF = 0.8")) and (.[1].cost_sources == null)' \
  "$R/t_pr.jsonl" > /dev/null && pass "the sim row says which figures it rests on; the plan row does not" ||
  fail "cost_sources: $(jq -s -c '[.[] | .cost_sources]' "$R/t_pr.jsonl")"

# ---- batch "auto": megatrain's own choice (`train --batch auto`), recorded in the row. The
# measured configuration runs on the sim backend here, as the campaign's dry run does (the cpu
# backend has no device memory to plan); a re-run at the recorded batch and knobs (sweeps.as_run,
# what sim_check.py runs) prices the same step.
cat > "$tmp/auto.json" <<'EOF2'
{"schema": "megatrain.sweep/1", "experiment": "t_auto",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "hardware": "h100-128g", "batch": "auto",
              "seq_len": 16, "precision": "paper", "steps": 4, "warmup": 1, "variant": "batch=auto"},
 "configs": [{"mode": "projected"}, {"mode": "measured", "backend": "sim"}]}
EOF2
run "$tmp/auto.json" 2> "$tmp/err14" || { fail "batch auto run exit $?"; cat "$tmp/err14"; }
every_row "batch auto rows (projected, measured on the sim)" "$R/t_auto.jsonl" '
  (.batch | type == "number") and .batch >= 1 and .batch == .batch_auto.batch and .tokens == .batch * .seq_len
  and (.batch_auto.args | length == 6) and (.batch_auto.args[0] == "--recompute")
  and (.batch_auto.why | test("^--batch auto: batch [0-9]+")) and .batch_auto.plan_batch == .batch'
rerun=$(python3 - "$R/t_auto.jsonl" "$tmp/auto.json" <<'EOF2'
import json, os, sys, tempfile
from harness.sweep import common, sweeps, sim_check
from harness.sweep.megatrain_cli import Runner
rows = [json.loads(l) for l in open(sys.argv[1])]
cfgs = {sweeps.config_key(c): c for c in sweeps.expand(sweeps.load(sys.argv[2]))}
with tempfile.TemporaryDirectory() as t:
    R = Runner(common.bin_dir(None), t, timeout=120)
    for r in rows:
        c = sweeps.as_run(cfgs[r["config_key"]], r)
        s = sim_check.sim_row(R, c, "h100-128g", [])
        print(c["batch"] == r["batch"], abs(s["step_ms"] / r["step_ms"]["median"] - 1) < 1e-9)
EOF2
)
[ "$(echo $rerun)" = "True True True True" ] && pass "as_run: the recorded batch and knobs re-run to the same step" ||
  fail "as_run re-run: $rerun"
for bad in '"auto", "mode": "measured"' '0' '"8"' '"auto", "tokens_per_step": 64' '"auto", "mode": "projected-plan"'; do
  printf '{"schema": "megatrain.sweep/1", "experiment": "t_ab", "defaults": {"model": "megatrain/tests/data/tiny5_llama.json",
   "hardware": "h100-128g", "batch": %s}}\n' "$bad" > "$tmp/ab.json"
  run "$tmp/ab.json" 2> "$tmp/err15"; rc=$?
  [ "$rc" = 2 ] && [ "$(grep -c . "$tmp/err15")" = 1 ] && grep -q "batch" "$tmp/err15" &&
    pass "batch $bad refused in one line before running" || { fail "batch $bad: exit $rc"; cat "$tmp/err15"; }
done

# a --hardware override is recorded, and its file then holds only that override's rows
run --hardware h100-128g "$tmp/pr.json" 2> "$tmp/err10" || fail "override run exit $?"
[ "$(jq -s -c '[.[] | .sweep.hardware_override] | unique' "$R/t_pr.jsonl")" = '["h100-128g"]' ] &&
  [ "$(jq -s -c '[.[] | .hardware] | unique' "$R/t_pr.jsonl")" = '["h100-128g"]' ] &&
  pass "--hardware override recorded; the other profile's rows are gone" || fail "override rows"

# ---- a real peer (baselines/peers/PEER.py) as a configuration: a stub peer here (CI has no
# torch) prints the row the real scripts print (common.make_row); the sweep's row takes its
# timings, names its system, recomputes the metrics and carries mt-env's env block; a peer
# that fails gives an error row; the arguments the peer got are the sweep's.
mkdir -p "$tmp/peers"
cat > "$tmp/peers/deepspeed_zero3.py" <<'EOF'
import argparse, json, os, sys
from baselines.peers import common  # the sweep runs a peer with the repo on PYTHONPATH
ap = argparse.ArgumentParser()
common.add_common_args(ap)
ap.add_argument("--fail", action="store_true")
ap.add_argument("--old-rule", action="store_true")
a = ap.parse_args()
open(os.environ["STUB_ARGS"], "w").write(json.dumps(sys.argv[1:]))
if a.fail:
    print("deepspeed_zero3: cannot load DeepSpeed's CPU Adam op (stub)", file=sys.stderr)
    sys.exit(3)
L = json.load(open(a.config))["num_hidden_layers"]  # common.load_config needs transformers
row = common.make_row(experiment=a.experiment, system="deepspeed_zero3", model="stub", params=123456789,
                      layers_run=a.layers or L, layers_model=L, batch=a.batch,
                      seq_len=a.seq_len, precision=a.precision, step_times_s=[0.5, 0.4, 0.6, 0.45, 0.55][:a.steps],
                      peak_gpu=1000, peak_host=2000, env={"gpu_name": "NVIDIA H100 80GB HBM3"})
row.update(fwd_ms=100.0, bwd_ms=250.0, optimizer_ms=150.0, setup_s=42.0, setup={"imports_s": 9.0},  # phase_fields
           attention_impl="sdpa")  # what megatrain_official.py says it ran
row.update(timing_rule="steady-window/1" if a.old_rule else common.TIMING_RULE,  # peer_loop.timing_fields
           timing="phases" if a.phases else "ratio", work={"recomputed_layers": 2}, work_differs=["x"],
           ds={"cpu_adam": {"threads": 16}})
print(json.dumps(row))
EOF
printf 'import sys\nprint("megatrain_official: skipped: no .official/ checkout", file=sys.stderr)\nsys.exit(77)\n' \
  > "$tmp/peers/megatrain_official.py"
cat > "$tmp/peer.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_peer",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "cuda", "mode": "measured",
              "batch": 2, "seq_len": 16, "precision": "mixed", "layers": 3, "steps": 8, "warmup": 2,
              "peer": "deepspeed_zero3"},
 "configs": [{}, {"args": ["--fail"]}, {"args": ["--old-rule"]}, {"args": ["--phases"]}]}
EOF
MT_PEERS_DIR=$tmp/peers STUB_ARGS=$tmp/stub_args run "$tmp/peer.json" 2> "$tmp/err11"; rc=$?
every_row "peer rows" "$R/t_peer.jsonl" 'true'
if [ "$rc" = 1 ] && jq -s -e '(.[0].system == "deepspeed_zero3") and (.[0].backend == "cuda") and (.[0].mode == "measured")
      and (.[0].step_ms == {"median": 500, "min": 400, "max": 600, "n": 5}) and (.[0].params == 123456789)
      and (.[0].layers_run == 3) and (.[0].layers_model == 5) and (.[0].precision == "mixed") and (.[0].model == "tiny5_llama")
      and (.[0].peer.system == "deepspeed_zero3") and (.[0].env.git_sha | type == "string" or . == null)
      and (.[0].fwd_ms == 100) and (.[0].optimizer_ms == 150) and (.[0].setup_s == 42) and (.[0].setup.imports_s == 9)
      and (.[0].attention_impl == "sdpa")
      and (.[1].error | test("exit 3.*CPU Adam"))' "$R/t_peer.jsonl" >/dev/null; then
  pass "peer configuration: the peer's timings in a sweep row, a failing peer an error row"
else
  fail "peer rows (exit $rc)"; cat "$tmp/err11"; jq -c '{system, step_ms, params, model, error}' "$R/t_peer.jsonl"
fi
# the one timing rule (harness/resultslib/timing.py): megatrain's rows and a peer's say it; a peer
# timed by another rule is an error row, a --phases run a row marked "phases" that no ratio reads
rule=$(python3 -c "import sys; from harness import resultslib; print(resultslib.TIMING_RULE)")
if jq -s -e --arg rule "$rule" '(.[0].timing_rule == $rule) and (.[0].timing == "ratio")
      and (.[0].work.recomputed_layers == 2) and (.[0].work_differs == ["x"]) and (.[0].ds.cpu_adam.threads == 16)
      and (.[2].error | test("timing rule .steady-window/1., not")) and (.[3].timing == "phases")' \
      "$R/t_peer.jsonl" >/dev/null &&
   [ "$(python3 -c "import sys, json; from harness import resultslib
rows = [json.loads(l) for l in open('$R/t_peer.jsonl')]
print([bool(resultslib.ok(r)) for r in rows])")" = "[True, False, False, False]" ]; then
  pass "timing rule: a peer's rule, work and DeepSpeed knobs in its row; another rule refused; a phases row no ratio's"
else
  fail "timing rule in peer rows"; jq -c '{timing_rule, timing, work, error}' "$R/t_peer.jsonl"
fi
if jq -e '. as $a | ($a | index("--warmup")) as $w | ($a | index("--steps")) as $s | ($a | index("--layers")) as $l
          | $a[$w + 1] == "2" and $a[$s + 1] == "5" and $a[$l + 1] == "3" and ($a | index("--phases")) != null
          and ($a[($a | index("--config")) + 1] | endswith("megatrain/tests/data/tiny5_llama.json"))' "$tmp/stub_args" >/dev/null; then
  pass "the peer got the sweep's model, depth, warm-up and timed steps (steps - warmup - 1)"
else
  fail "peer arguments: $(cat "$tmp/stub_args" 2>/dev/null)"
fi
# configurations not reached are no errors: a peer that skips (exit 77), a peer script not in the
# tree, a peer --skip-peer names, one whose expect_s no longer fits before --deadline; each is
# listed with its reason in <experiment>.unreached.json and the sweep exits 0
cat > "$tmp/reach.json" <<'EOF'
{"schema": "megatrain.sweep/1", "experiment": "t_reach",
 "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "cuda", "mode": "measured",
              "batch": 2, "seq_len": 16, "precision": "mixed", "layers": 3, "steps": 8, "warmup": 2},
 "configs": [{"peer": "megatrain_official", "precision": "paper"}, {"peer": "fsdp2_offload"},
             {"peer": "deepspeed_zero3"}, {"peer": "deepspeed_zero3", "batch": 4, "expect_s": 100000}]}
EOF
MT_PEERS_DIR=$tmp/peers STUB_ARGS=$tmp/stub_args run "$tmp/reach.json" --skip-peer "deepspeed_zero3=its CPU Adam op did not build" \
  --deadline $(( $(date +%s) + 600 )) 2> "$tmp/err12"; rc=$?
u=$R/t_reach.unreached.json
if [ "$rc" = 0 ] && [ ! -s "$R/t_reach.jsonl" ] && jq -e 'length == 4 and (.[0].reason | test("exit 77"))
      and (.[1].reason | test("fsdp2_offload.py is not in this tree")) and (.[2].reason | test("CPU Adam op did not build"))
      and (.[3].reason | test("CPU Adam"))' "$u" > /dev/null; then
  pass "configurations not reached (exit 77, no script, --skip-peer) are listed with their reason, no error rows"
else
  fail "not reached (exit $rc)"; cat "$tmp/err12"; cat "$u"
fi
MT_PEERS_DIR=$tmp/peers STUB_ARGS=$tmp/stub_args run "$tmp/reach.json" --only "b4" --force \
  --deadline $(( $(date +%s) + 600 )) 2> "$tmp/err13"; rc=$?
[ "$rc" = 0 ] && jq -e 'length == 1 and (.[0].reason | test("no time left: it needs about 100000 s"))' "$u" > /dev/null &&
  pass "--deadline: a configuration whose expect_s does not fit is not started" ||
  { fail "--deadline (exit $rc)"; cat "$tmp/err13"; }
[ "$(python3 -c "import sys; from harness.sweep import one_config as o
print(o.startup_s('megatrain: ready in 12.3 s (alloc 1.0 s)'), o.startup_s('no such line'))")" = "12.3 None" ] &&
  pass "startup_s: megatrain's 'ready in S s' line, None without one" || fail "startup_s parse"

# a peer key is in the configuration key only when set: existing keys do not move
k1=$(python3 -c "
import sys; from harness.sweep import sweeps
c = sweeps.expand({'schema': 'megatrain.sweep/1', 'experiment': 'k', 'defaults': {'model': 'm.json'}})[0]
print(sweeps.config_key(c))")
[ "$k1" = "$(python3 -c "
import hashlib, json, sys; from harness.sweep import sweeps
c = dict(sweeps.DEFAULTS, model='m.json')
print(hashlib.sha1(json.dumps({f: c.get(f) for f in sweeps.KEY_FIELDS}, sort_keys=True).encode()).hexdigest()[:16])")" ] &&
  pass "a configuration without a peer keeps the key it had before peers existed" || fail "config key moved: $k1"

finish
