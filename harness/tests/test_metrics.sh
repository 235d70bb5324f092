#!/usr/bin/env bash
# One definition of each metric (megatrain/core/METRICS.md): the C side
# (core/metrics.c, in `megatrain train` JSON lines and `megatrain plan`) and the
# Python side (harness/metrics.py, in results rows) give the same digits from
# the same inputs; the Python dense-peak lookup reads harness/dense_peaks.json.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
MT="${MT_BIN:-build/bin}/megatrain"
[ -x "$MT" ] || { echo "missing $MT"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--config experiments/models/qwen2.5-14b.json --batch 8 --seq-len 1024 --precision paper)
"$MT" plan "${args[@]}" --hardware gh200-480g > "$tmp/plan.json" || { echo "FAIL: plan"; exit 1; }
"$MT" train "${args[@]}" --backend sim --hardware gh200-480g --steps 2 > "$tmp/train.jsonl" 2> /dev/null ||
  { echo "FAIL: sim train"; exit 1; }
python3 - "$tmp/plan.json" "$tmp/train.jsonl" <<'PY'
import json, sys
from harness import metrics
plan = json.load(open(sys.argv[1]))
rows = [json.loads(l) for l in open(sys.argv[2])]
fails = []
# cJSON prints 15 significant digits wherever they read back within DBL_EPSILON
# (relative), so the JSON inputs Python recomputes from may sit an ulp or two off
# C's: 1e-14 allows that and nothing a different definition (1e3 vs 1024, 6N vs
# 8N, another peak) could hide in.
def same(what, c, py):
    num = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (c, py))
    if (abs(c - py) > 1e-14 * max(abs(c), abs(py))) if num else c != py:
        fails.append("%s: C %r, Python %r" % (what, c, py))
params = plan["params"]
p = plan["prediction"]
same("plan tokens_per_s", plan["tokens_per_s"], metrics.tokens_per_s(plan["tokens_per_step"], plan["step_ms"]))
same("plan tflops", plan["tflops"], metrics.tflops(params, plan["tokens_per_step"], plan["step_ms"]))
same("plan mfu", plan["mfu"], metrics.mfu(plan["tflops"], p["peak_tflops"]))
same("plan hfu", plan["hfu"], metrics.hfu(p["flops_executed"], plan["step_ms"], p["peak_tflops"]))
# model FLOPs (no input embedding, causal attention): by hand, then the plan's against Python's
same("model flops per token", metrics.model_flops_per_token(100, 2, 4, 16, 32), 6.0 * 100 + 6.0 * 2 * 4 * 16 * 32)
same("params without the input embedding", [metrics.params_model(1000, 10, 8, t) for t in (False, True)], [920, 1000])
cfg = json.load(open("experiments/models/qwen2.5-14b.json"))
fpt = metrics.model_flops_of_config(cfg, params, plan["layers"], plan["seq_len"])
same("plan model_flops_per_token", plan["model_flops_per_token"], fpt)
same("plan model_tflops", plan["model_tflops"], metrics.model_tflops(fpt, plan["tokens_per_step"], plan["step_ms"]))
same("plan model_mfu", plan["model_mfu"], metrics.mfu(plan["model_tflops"], p["peak_tflops"]))
for r in rows:
    s = "step %d " % r["step"]
    same(s + "tokens_per_s", r["tokens_per_s"], metrics.tokens_per_s(r["tokens"], r["step_ms"]))
    same(s + "tflops", r["tflops"], metrics.tflops(params, r["tokens"], r["step_ms"]))
    same(s + "gpu_busy_frac", r["gpu_busy_frac"], metrics.busy_frac(r["compute_ms"], r["step_ms"]))
peaks = {n: metrics.dense_peak_tflops(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA GH200 480GB",
                                                   "NVIDIA H200", "NVIDIA GeForce RTX 4090", "Tesla T4", None)}
want = {"NVIDIA H100 80GB HBM3": 989.0, "NVIDIA H100 PCIe": 756.0, "NVIDIA GH200 480GB": 989.0, "NVIDIA H200": 989.0,
        "NVIDIA GeForce RTX 4090": 165.2, "Tesla T4": None, None: None}
same("dense peaks", peaks, want)
same("busy_frac of an empty step", metrics.busy_frac(1.0, 0.0), 0.0)
same("gbps without time", metrics.gbps(1e9, 0.0), 0.0)
same("gbps", metrics.gbps(2e9, 1000.0), 2.0)
for f in fails:
    print("FAIL:", f)
print("test_metrics: %d failed" % len(fails))
sys.exit(1 if fails else 0)
PY
