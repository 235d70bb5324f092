#!/usr/bin/env bash
# The claims of gpu_width (C1 and C3 at their own width, issue 45) on MADE-UP rows (timings
# invented, shaped as extrapolate.py writes them): without GPU rows each claim is "pending GPU"
# beside the sim's projection of the full model; with rows, the reduced-depth claims list each
# measured depth (step, H2D, host AdamW) and the full-depth ones their bar, said as a held-out
# depth's error for C1 and as the fit's noise alone for C3 (no depth held out), or as a failed
# held-out depth. Needs python3 only.
. "$(dirname "$0")/lib.sh" python3
mkdir -p "$tmp/res"
cp results/c1_120b.jsonl results/c3_context.jsonl "$tmp/res/"
python3 -m harness.sweep.claims --results "$tmp/res" > "$tmp/pending.txt" 2>/dev/null
n=$(grep -E "^(C1|C3) (at|extrapolated)" "$tmp/pending.txt" | grep -c "pending GPU (part W.*beside: projected (sim, \(h200-1.5t\|gh200-480g\))\|beside: projected (sim, \(h200-1.5t\|gh200-480g\)).*pending GPU (part W")
[ "$n" = 4 ] && pass "no GPU rows: 4 width claims pending GPU, each beside the sim's full-model projection" ||
  { fail "pending rows: $n of 4"; grep -E "^(C1|C3)" "$tmp/pending.txt"; }

made_up() {  # made_up C1_FIT_JSON C3_FIT_JSON: gpu_width rows with those fits (made-up numbers)
python3 - "$tmp/res" "$1" "$2" <<'PY'
import json, os, sys
from harness.sweep import common, one_config, sweeps
out, fits = sys.argv[1], [json.loads(a) for a in sys.argv[2:]]
env = {k: None for k in common.ENV_KEYS}
env.update(git_sha="0123456789ab", git_dirty=False, gpu_name="NVIDIA H200")
path = "experiments/sweeps/gpu_width.json"
rows = []
for c, fit in zip(sweeps.expand(sweeps.load(path)), fits):
    r = one_config.blank_row("gpu_width", c, dict(env), path)
    L = 96 if c["model_name"] == "dense-120b" else 28
    ms = 40000.0 if L == 96 else 500000.0  # made up
    r.update(params=10 ** 11, layers_run=L, layers_model=L, fit=fit, peak_host_bytes=10 ** 12,
             step_ms={"median": ms, "min": ms * 0.9, "max": ms * 1.1, "n": 5, "err_frac": 0.1})
    one_config.finish_speed(r, r["batch"] * c["seq_len"], r["params"], 989.0)
    rows.append(r)
common.write_jsonl(os.path.join(out, "gpu_width.jsonl"), rows)
PY
python3 -m harness.sweep.claims --results "$tmp/res" 2>/dev/null | tr -s ' ' > "$tmp/claims.txt"
}
m='{"depth": 1, "step_ms": 800, "step_ms_min": 790, "step_ms_max": 810, "n": 5, "h2d_gbps": 51.5, "optimizer_ms": 210}'
m2='{"depth": 2, "step_ms": 1000, "step_ms_min": 990, "step_ms_max": 1010, "n": 5, "h2d_gbps": 52.0, "optimizer_ms": 260}'
made_up "{\"depths\": [1, 2], \"holdout\": {\"depth\": 3, \"err_frac\": -0.031, \"lever\": 63}, \"measured\": [$m, $m2]}" \
        "{\"depths\": [1, 2], \"holdout\": null, \"measured\": [$m, $m2]}"
grep -q "^C1 at 120B width, reduced depth .*L1 800 ms (H2D 51.5 GB/s = [0-9]*% of [0-9.]* pinned, host AdamW 210 ms), L2 1000 ms" "$tmp/claims.txt" &&
  grep -q "^C1 extrapolated to full depth .*step 40000 ms ±10% (held-out L3: -3.1%, x63 to full depth).*beside: projected (sim, h200-1.5t)" "$tmp/claims.txt" &&
  grep -q "^C3 extrapolated to full depth .*step 500000 ms ±10%, the fit's timing noise alone (no depth held out" "$tmp/claims.txt" &&
  grep -q "^C3 at 7B width and 524288 tokens, reduced depth .*524288 tokens trained in one step" "$tmp/claims.txt" &&
  ! grep -q "template error\|pending GPU (part W" "$tmp/claims.txt" &&
  pass "made-up rows: per-depth figures, C1's held-out bar, C3's bar said to be the fit's alone" ||
  { fail "claims from made-up rows"; grep -E "^(C1|C3)" "$tmp/claims.txt"; }
made_up "{\"depths\": [1, 2], \"holdout\": null, \"holdout_failed\": {\"depth\": 3, \"error\": \"killed: out of host memory\"}, \"measured\": [$m, $m2]}" \
        "{\"depths\": [1, 2], \"holdout\": null, \"measured\": [$m, $m2]}"
grep -q "^C1 extrapolated to full depth .*(held-out L3 failed: killed: out of host memory)" "$tmp/claims.txt" &&
  pass "a failed held-out depth is named in the claim with its error" ||
  { fail "failed held-out depth"; grep -E "^C1" "$tmp/claims.txt"; }
grep -E "^(C1|C3) (at|extrapolated)" "$tmp/claims.txt" | cut -c1-400
finish
