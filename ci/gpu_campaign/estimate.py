"""estimate.py: each part's GPU minutes, derived from the sizes of its steps (--list).

Nothing here has been timed on a GPU: these are estimates, and each term says what it
rests on.
  start      90 s: a bare machine at every call, "1-2 min" (/work/.library/device/README.md)
  sweep      per configuration: steps x the step time `megatrain plan --hardware h100-128g`
             predicts (the analytic model; test_plan_vs_sim keeps it within 10% of the sim),
             + setup: params x SETUP_NS_PER_PARAM_CORE / 16 cores (random init and zeroed
             moments of the host state; the rate measured on the dev VM: 495M params in
             34.9 s on one thread, i.e. 70 ns per parameter), + PROCESS_S per process;
             an extrapolated configuration: that for each depth it runs
  peers      DeepSpeed ZeRO-3 offload: (warm-up + timed) steps x our zero3 schedule's planned
             step (our model of it, baselines/ZERO3.md) + setup; FSDP2 offload: the same plus
             torch's serial CPU AdamW at TORCH_ADAM_NS_PER_PARAM (shared/REFERENCE.md: an
             11.6B step in 56 s)
  the rest   the step's allowance (parts.py: ALLOW_*), not derived
  pack       PACK_S
"""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "harness", "sweep"))
import run  # noqa: E402
import sweeps  # noqa: E402

START_S = 90
PACK_S = 15
PROCESS_S = 5                 # process start, CUDA context, cuBLAS/cuDNN handles, plan: an allowance
SETUP_NS_PER_PARAM_CORE = 70  # measured on the dev VM (see above)
GPU_CORES = 16                # the lent machine (device README)
TORCH_ADAM_NS_PER_PARAM = 56e9 / 11.6e9  # REFERENCE.md, PyTorch's CPU Adam
HARDWARE = "h100-128g"


class Planner:
    def __init__(self, bin_dir):
        self.mt = os.path.join(bin_dir, "megatrain")
        if not os.access(self.mt, os.X_OK):
            raise FileNotFoundError(f"{self.mt} not found; HINT: make build (or set MT_BIN): the estimates "
                                    f"come from megatrain plan")
        self.tmp = tempfile.mkdtemp(prefix="mt-estimate-")
        self.cache = {}

    def config(self, c, layers):
        src = c["model"] if os.path.isabs(c["model"]) else os.path.join(REPO, c["model"])
        cfg = json.load(open(src))
        cfg.update(c.get("overrides") or {})
        if layers:
            cfg["num_hidden_layers"] = int(layers)
            if "max_window_layers" in cfg:
                cfg["max_window_layers"] = min(int(cfg["max_window_layers"]), int(layers))
        path = os.path.join(self.tmp, f"{abs(hash(json.dumps(cfg, sort_keys=True)))}.json")
        json.dump(cfg, open(path, "w"))
        return path, int(cfg["num_hidden_layers"])

    def plan(self, c, layers, schedule=None, precision=None):
        path, L = self.config(c, layers)
        cmd = [self.mt, "plan", "--config", path, "--batch", str(c["batch"]), "--seq-len", str(c["seq_len"]),
               "--precision", precision or c["precision"], "--schedule", schedule or c["schedule"],
               "--grad-accum", str(c["grad_accum"]), "--hardware", HARDWARE]
        cmd += run.plan_args(c["args"])
        key = tuple(cmd[3:4]) + tuple(cmd[4:])
        if key not in self.cache:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"megatrain plan failed: {p.stderr.strip().splitlines()[-1:]}")
            self.cache[key] = json.loads(p.stdout)
        return self.cache[key]


def setup_s(params):
    return params * SETUP_NS_PER_PARAM_CORE * 1e-9 / GPU_CORES + PROCESS_S


def config_s(P, c):
    """(seconds, basis) of one sweep configuration on the GPU machine."""
    if c.get("peer"):
        d = P.plan(c, c["layers"], schedule="zero3", precision="paper")
        n = c["steps"] - 1  # warm-up + timed: a peer has no extra last step
        step = d["step_ms"] / 1e3
        if c["peer"] == "fsdp2_offload":
            step += d["params"] * TORCH_ADAM_NS_PER_PARAM * 1e-9
        return n * step + setup_s(d["params"]), "peer"
    if c["mode"] == "extrapolated":
        t = 0.0
        for L in sorted(set(c["layers_fit"]) | {c["layers_holdout"]}):
            d = P.plan(c, L)
            t += c["steps"] * d["step_ms"] / 1e3 + setup_s(d["params"])
        return t, "plan"
    if c["mode"] == "measured":
        d = P.plan(c, c["layers"])
        if not d.get("fits") or not d.get("step_ms"):
            return float(c["timeout_s"]), "timeout (plan: does not fit)"
        return c["steps"] * d["step_ms"] / 1e3 + setup_s(d["params"]), "plan"
    return 2.0, "sim"  # a projection: seconds of CPU


def step_s(P, st):
    if st["kind"] == "sweep":
        s = sweeps.load(os.path.join(REPO, st["sweep"]))
        parts = [config_s(P, c) for c in sweeps.expand(s)]
        t = sum(x for x, _ in parts)
        return t, f"{len(parts)} configurations from megatrain plan ({HARDWARE})"
    t = st.get("allow_s", 0)
    if st["kind"] == "peers":
        return t, "allowance (pip install + DeepSpeed's cpu_adam JIT build)"
    return t, "allowance"


def part(P, p):
    rows = [("start", START_S, "device README: 1-2 min")]
    for st in p["steps"]:
        t, basis = step_s(P, st)
        capped = min(t, st["timeout_s"])
        rows.append((st["name"], capped, basis + (f"; {t:.0f} s capped at its timeout" if capped < t else "")))
    rows.append(("pack", PACK_S, "allowance"))
    return sum(t for _, t, _ in rows), rows


def minutes(seconds):
    return int(math.ceil(seconds / 60.0))
