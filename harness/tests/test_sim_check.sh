#!/usr/bin/env bash
# harness/sweep/sim_check.py: the sim re-run on the calibrated profile against every measured
# GPU configuration. Checks that it passes on the committed rows, that every measured row is
# reported (none dropped) with whether it validates the current engine, that the committed
# results/sim_validation.json is what the check writes now (a cost-model change that moves a
# projection must regenerate it: `make sim-check`), and that it fails, naming the
# configuration, when the profile misprices the GPU (GEMMs at half the measured rate).
# Deterministic (virtual time): nothing here depends on this machine's speed.
. "$(dirname "$0")/lib.sh" python3 bins
git rev-parse --verify -q 955be61 > /dev/null 2>&1 ||
  { echo "skipped: no git history here (the check tells engine commits apart by ancestry)"; exit 77; }

if python3 harness/sweep/sim_check.py --out "$tmp/v.json" > "$tmp/out" 2> "$tmp/err"; then
  pass "the check passes on the committed rows"
else
  fail "the check failed: $(tail -2 "$tmp/err")"
fi

python3 - "$tmp/v.json" > "$tmp/py" 2>&1 <<'EOF' && pass "schema, every row reported, verdicts consistent" || fail "$(cat "$tmp/py")"
import json, os, sys
sys.path.insert(0, "harness/sweep")
from claims import noise
import resultslib
v = json.load(open(sys.argv[1]))
assert v["schema"] == "megatrain.sim_validation/1", v["schema"]
assert set(v) == {"schema", "profiles", "growth"}, sorted(v)
assert v["growth"].strip(), "no growth rule"
measured = 0
for exp in ("gpu_goal", "gpu_c2_deepspeed", "gpu_context", "gpu_ablations"):
    p = os.path.join("results", exp + ".jsonl")
    if os.path.exists(p):
        measured += sum(1 for r in resultslib.load_jsonl(p) if r.get("mode") == "measured"
                        and r.get("backend") == "cuda" and r.get("system") == "megatrain" and resultslib.ok(r))
seen = 0
for name, p in v["profiles"].items():
    assert set(p) == {"gpu", "n", "worst_abs_err", "median_abs_err", "within", "configs"}, sorted(p)
    val = [c for c in p["configs"] if c["validates_current_engine"]]
    assert p["n"] == len(val) and p["n"] >= 1, (name, p["n"])
    assert abs(p["worst_abs_err"] - max(abs(c["err"]) for c in val)) < 1e-9
    for c in p["configs"]:
        assert set(c) == {"key", "measured_ms", "sim_ms", "err", "validates_current_engine", "why"}, sorted(c)
        assert abs(c["sim_ms"] / c["measured_ms"] - 1 - c["err"]) < 1e-3, c
        assert c["why"], c
    seen += len(p["configs"])
assert seen == measured, f"{seen} configurations reported of {measured} measured rows"
EOF

if cmp -s "$tmp/v.json" results/sim_validation.json; then
  pass "results/sim_validation.json is what the check writes now"
else
  fail "results/sim_validation.json differs from the check's output: run 'make sim-check' and commit it"
fi
grep -q "validates the current engine: no: measured at f1e6cbf" "$tmp/out" &&
  pass "rows measured before the host-side changes are reported as not validating, with the commit" ||
  fail "no row is reported as measured on an older engine"

# What the sim's figures rest on: the H200 profile's AdamW rate is derived from a row of the engine
# before the host-side changes (said), its backward GEMMs assumed; gh200-480g's AdamW is assumed.
grep -q "derived: host.adamw_params_per_s.paper \[measured at f1e6cbf, before 32a4215" "$tmp/out" &&
  grep -q "assumed: .*sim: backward GEMMs at gpu.gemm_efficiency" "$tmp/out" &&
  grep -q "measured: gpu.gemm_efficiency, link.h2d_gbps.pinned" "$tmp/out" &&
  pass "cost sources: measured, derived from an older engine (named), assumed" ||
  fail "cost sources line: $(grep "rest on" "$tmp/out")"
python3 harness/sweep/cost_sources.py gh200-480g > "$tmp/gh.json" &&
  python3 -c "import json, sys; d = json.load(open(sys.argv[1]))['figures']
assert d['host.adamw_params_per_s.paper']['kind'] == 'assumed', d['host.adamw_params_per_s.paper']  # derived from an assumed rate
assert d['link.duplex_factor']['kind'] == 'assumed' and d['host.mem_gbps']['kind'] == 'datasheet', d
assert d['sim.h MT_SIM_HBM_EFF = 0.8']['kind'] == 'assumed'" "$tmp/gh.json" &&
  pass "cost sources of a datasheet profile (gh200-480g): a rate derived from an assumed one is assumed" ||
  fail "cost_sources.py gh200-480g"

# A profile that prices GEMMs at half the measured rate: the compute-bound b64 row leaves the band.
mkdir -p "$tmp/hw"
cp experiments/hardware/*.json "$tmp/hw/"
python3 - "$tmp/hw/h200-128g.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["gpu"]["gemm_efficiency"] /= 2
json.dump(p, open(sys.argv[1], "w"))
EOF
if MT_HARDWARE_DIR=$tmp/hw python3 harness/sweep/sim_check.py --no-write > "$tmp/out2" 2> "$tmp/err2"; then
  fail "a profile with GEMMs at half rate passed"
elif grep -q "outside ±10%.*qwen2.5-14b megatrain b64" "$tmp/err2"; then
  pass "a mispriced profile fails, naming the configuration"
else
  fail "a mispriced profile failed without naming b64: $(tail -1 "$tmp/err2")"
fi
finish
