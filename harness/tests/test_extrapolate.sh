#!/usr/bin/env bash
# harness/sweep/extrapolate.py on MADE-UP runs (numbers invented for the arithmetic, not
# measured): the held-out bar err(h) x lever with the noise in quadrature; without a held-out
# depth ("none") the bar is the runs' spread carried to L by the fit's weights, and is zero
# when the runs have no spread; a bar past +-100% still makes a valid row, flagged; a held-out depth whose run fails is dropped with its error
# while a fitted depth's failure still fails; the sweep refuses "none" with one timed step.
# Needs python3 only.
. "$(dirname "$0")/lib.sh" python3
python3 - > "$tmp/out" 2>&1 <<'PY' || fail "made-up extrapolation checks (see below)"
import sys
from harness.sweep.extrapolate import extrapolate, measure_depths, NO_HOLDOUT_METHOD
from harness.sweep.megatrain_cli import RunError
from harness.resultslib.schema import loads, made_row_problems, step_ms_problems

def run(med, lo, hi, n=5):  # made up: a depth's step statistics
    return {"stats": {"median": med, "min": lo, "max": hi, "n": n}, "rss": None, "figures": {}}

def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))

# made up: 100 ms + 50 ms a layer at depths 1 and 2; depth 3 measured 210 ms (fit says 250)
runs = {1: run(150, 147, 153), 2: run(200, 196, 204), 3: run(210, 205, 215)}
step, fit = extrapolate(runs, [1, 2], 3, 96)
pred = 100 + 50 * 96
lever = (96 - 1.5) / (3 - 1.5)
want = ((40 * lever / pred) ** 2 + (5 / 210) ** 2) ** 0.5   # held-out error at L, noise of depth 3
assert close(step["median"], pred) and close(step["err_frac"], want), (step, want)
assert fit["holdout"]["depth"] == 3 and close(fit["holdout"]["err_frac"], 250 / 210 - 1)
assert [m["depth"] for m in fit["measured"]] == [1, 2, 3] and fit["measured"][2]["step_ms"] == 210
print("ok   held-out depth: bar = |pred - meas| x lever / pred(L), noise in quadrature")

# made up: the same fit, no held-out depth: noise 3 and 4 ms carried by weights w1 = 1/2 - 94.5, w2 = 1/2 + 94.5
two = {1: runs[1], 2: runs[2]}
step, fit = extrapolate(two, [1, 2], None, 96)
w1, w2 = 0.5 - 94.5, 0.5 + 94.5
want = ((w1 * 3) ** 2 + (w2 * 4) ** 2) ** 0.5 / pred
assert close(step["err_frac"], want) and fit["holdout"] is None and fit["err_method"] == NO_HOLDOUT_METHOD, (step, want)
assert step["err_frac"] > fit["noise_frac"]  # the lever grows the bar past the runs' own spread
print(f"ok   no held-out depth: bar {100 * want:.1f}% = the runs' spread carried to L (said in err_method)")
step, fit = extrapolate({1: run(150, 150, 150), 2: run(200, 200, 200)}, [1, 2], None, 96)
assert step["err_frac"] == 0.0
print("ok   no held-out depth, no spread: no bar to claim (0), err_method says why")

# made up: a loaded machine: depth 3 measured 400 ms where the fit says 250, so the bar passes +-100%;
# the row keeps its median and E, its min is depth 3's fastest step (a deeper model is no faster), and it
# passes the row check (median x (1 - E) would be negative: min 0, a refused row, a failed sweep)
wide = {1: runs[1], 2: runs[2], 3: run(400, 395, 405)}
step, fit = extrapolate(wide, [1, 2], 3, 96)
assert step["err_frac"] > 1 and close(step["median"], pred) and step["max"] > pred, step
assert step["min"] == 395 and "passes +-100%" in fit["bar_too_wide"] and "depth 3" in fit["bar_too_wide"], (step, fit)
assert step_ms_problems(step, "extrapolated") == [], step_ms_problems(step, "extrapolated")
# the whole row as the sweep writes it: a committed extrapolated row carrying this fit instead
row = loads(open("results/extrapolation_cpu.jsonl").readline())
row.update(step_ms=step, fit=fit, tokens_per_s=row["tokens"] * 1000.0 / step["median"])
assert made_row_problems(row) == [], made_row_problems(row)
print(f"ok   a bar of +-{100 * step['err_frac']:.0f}%: min = the deepest run's fastest step, flagged, a valid row")
step, fit = extrapolate(runs, [1, 2], 3, 96)
assert "bar_too_wide" not in fit and close(step["min"], pred * (1 - step["err_frac"]))
print("ok   a bar inside +-100% keeps min = median x (1 - E), unflagged")

class R:  # made up: a runner whose depth 3 fails like an out-of-memory run
    def model_config(self, c, d):
        return (f"cfg{d}", d, 96)
    def train(self, c, path):
        d = int(path[3:])
        if d in fail_at:
            raise RunError(f"depth {d}: killed (out of host memory)")
        return [{"step_ms": 100 + 50 * d, "peak_rss_bytes": d, "h2d_gbps": 50.0}] * 5
c = {"warmup": 1, "rounds": 1}
fail_at = {3}
got, per_round, failed = measure_depths(R(), c, [1, 2, 3], optional=(3,))
assert sorted(got) == [1, 2] and "out of host memory" in failed[3] and 3 not in per_round[0]
assert got[1]["figures"]["h2d_gbps"] == 50.0
print("ok   a failed held-out depth is dropped, its error kept")
try:
    measure_depths(R(), c, [1, 2, 3])
    raise AssertionError("a fitted depth's failure must fail the row")
except RunError:
    print("ok   a failed fitted depth fails the row")
PY
cat "$tmp/out"
grep -q "^ok   a failed fitted depth" "$tmp/out" || fail "extrapolate checks did not all run"

# the sweep: "none" needs two timed steps a depth; a held-out depth that is missing is refused
mk() { printf '{"schema": "megatrain.sweep/1", "experiment": "t_x", "defaults": {"model": "megatrain/tests/data/tiny5_llama.json", "backend": "sim", "hardware": "gh200-480g", "mode": "extrapolated", "layers_fit": [1, 2], %s}}\n' "$1" > "$tmp/s.json"; }
mk '"layers_holdout": "none", "steps": 3, "warmup": 1'
exits 2 'layers_holdout "none" with one timed step is refused' python3 -m harness.sweep.run "$tmp/s.json" --dry-run --out-dir "$tmp/r"
mk '"layers_holdout": "none", "steps": 4, "warmup": 1'
exits 0 'layers_holdout "none" with two timed steps is accepted' python3 -m harness.sweep.run "$tmp/s.json" --dry-run --out-dir "$tmp/r"
mk '"steps": 4, "warmup": 1'
exits 2 'no layers_holdout at all is refused' python3 -m harness.sweep.run "$tmp/s.json" --dry-run --out-dir "$tmp/r"
finish
