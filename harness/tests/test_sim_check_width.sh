#!/usr/bin/env bash
# harness/sweep/sim_check.py re-runs the sim against every depth an extrapolated GPU row
# measured (fit.measured: issue 45's width rows, gpu_width), at that depth: on a MADE-UP
# dense-120b row (timings invented, 1, 2 and 3 layers, clean tree at HEAD) each depth is
# reported under its own key (L1, L2, L3) with its measured median, written to the validation
# file, and the exit status agrees with the errors and the noise. Deterministic (virtual time).
. "$(dirname "$0")/lib.sh" python3 bins
git rev-parse --verify -q HEAD > /dev/null 2>&1 || { echo "skipped: no git history here"; exit 77; }
mkdir -p "$tmp/res"
python3 - "$tmp/res" <<'EOF2' || fail "made-up row"
import json, os, sys, subprocess
from harness.sweep import common, one_config, sweeps
sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()[:12]
env = {k: None for k in common.ENV_KEYS}
env.update(git_sha=sha, git_dirty=False, gpu_name="NVIDIA H200")
path = "experiments/sweeps/gpu_width.json"
c = [c for c in sweeps.expand(sweeps.load(path)) if c["model_name"] == "dense-120b"][0]
r = one_config.blank_row("gpu_width", c, dict(env), path)
meas = [{"depth": d, "step_ms": ms, "step_ms_min": ms * 0.99, "step_ms_max": ms * 1.01, "n": 5, "h2d_ms": 100.0,
         "compute_ms": ms * 0.9, "optimizer_ms": 50.0} for d, ms in ((1, 800.0), (2, 1000.0), (3, 1200.0))]  # made up
r.update(params=10 ** 11, layers_run=96, layers_model=96, fit={"depths": [1, 2], "holdout": None, "measured": meas},
         step_ms={"median": 20000.0, "min": 18000.0, "max": 22000.0, "n": 5, "err_frac": 0.1})
one_config.finish_speed(r, 16 * 1024, r["params"], 989.0)
common.write_jsonl(os.path.join(sys.argv[1], "gpu_width.jsonl"), [r])
EOF2
python3 -m harness.sweep.sim_check --results "$tmp/res" --out "$tmp/v.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
python3 - "$tmp/v.json" "$rc" > "$tmp/py" 2>&1 <<'EOF2' && pass "each measured depth re-run in the sim under its own key; $(cat "$tmp/py")" ||
import json, sys
v, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
cf = v["profiles"]["h200-128g"]["configs"]
keys = [c["key"] for c in cf]
assert keys == [f"dense-120b megatrain b16 T1024 paper L{d}" for d in (1, 2, 3)], keys
assert [c["measured_ms"] for c in cf] == [800.0, 1000.0, 1200.0], cf
assert all(c["sim_ms"] > 0 and c["validates_current_engine"] for c in cf), cf
out = [c for c in cf if abs(c["err"]) > 0.1 + 0.01 + 1e-9]
assert rc == (1 if out else 0), (rc, out)
print(f"exit {rc}, errors " + ", ".join(f"{100 * c['err']:+.0f}%" for c in cf))
EOF2
  { fail "sim_check on the depths: $(cat "$tmp/py")"; tail -5 "$tmp/out" "$tmp/err"; }
grep -q "^dense-120b megatrain b16 T1024 paper L2: measured 1000 ms, sim" "$tmp/out" &&
  pass "stdout names each depth with its measured step" || { fail "stdout"; head -5 "$tmp/out"; }
finish
