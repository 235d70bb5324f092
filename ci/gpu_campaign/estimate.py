"""estimate.py: each part's GPU minutes, derived from the sizes of its steps (--list).

These are estimates; each term says what it rests on (measured: the H200 leases of
2026-11-25/26: their summaries, results/campaign/*-summary.txt).
  start      30 s: measured (2026-11-25: "the start took about 30 s"; docs/REFERENCE.md#the-lent-gpu-machine
             says 1-2 min, the figure before it was measured)
  sweep      per configuration with `expect_s`: that wall time (measured on the 2026-11-26 lease
             for megatrain and DeepSpeed: 83-85 s and 73-80 s; an allowance the sweep file
             says so for the rest); the part's budget (parts.py budget_s) cuts the sweep where
             the next configuration would not fit, as run.py --deadline does on the machine;
             without expect_s: steps x the step time `megatrain plan --hardware h100-128g`
             predicts (the analytic model; test_plan_vs_sim keeps it within 10% of the sim),
             + setup: params x SETUP_NS_PER_PARAM_CORE / 16 cores (random init and zeroed
             moments of the host state; the rate measured on the dev VM: 495M params in
             34.9 s on one thread, i.e. 70 ns per parameter), + PROCESS_S per process;
             an extrapolated configuration: that for each depth it runs
  peers      DeepSpeed ZeRO-3 offload: (warm-up + timed) steps x our zero3 schedule's planned
             step (our model of it, baselines/ZERO3.md) + setup; FSDP2 offload: the same plus
             torch's serial CPU AdamW at TORCH_ADAM_NS_PER_PARAM (docs/REFERENCE.md#peers: an
             11.6B step in 56 s)
  the rest   parts.py's ALLOW_*: measured where the step ran on a lease (machine 0.7 s,
             copybench 3.7 s, peers_setup 53.3 s), else an allowance
  pack       PACK_S (measured: about 1 s, 2026-11-26 part B: 475 s in all, 474 s of steps)
"""
import json
import math
import os
import subprocess
import sys
import tempfile

from harness.sweep import megatrain_cli, sweeps

from . import parts

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

START_S = 30
PACK_S = 5
RUNNER_PACK_RESERVE_S = 25  # runner.PACK_RESERVE_S: the steps stop this much before the budget
RUNNER_PART_BUDGET_S = 510  # runner.PART_BUDGET_S
PROCESS_S = 5                 # process start, CUDA context, cuBLAS/cuDNN handles, plan: an allowance
SETUP_NS_PER_PARAM_CORE = 70  # measured on the dev VM (see above)
GPU_CORES = 16                # the lent machine (docs/REFERENCE.md#the-lent-gpu-machine)
TORCH_ADAM_NS_PER_PARAM = 56e9 / 11.6e9  # docs/REFERENCE.md#peers, PyTorch's CPU Adam
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
        cfg = megatrain_cli.resultslib.load_json(src)
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
        cmd += megatrain_cli.plan_args(c["args"])
        key = tuple(cmd[3:4]) + tuple(cmd[4:])
        if key not in self.cache:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"megatrain plan failed: {p.stderr.strip().splitlines()[-1:]}")
            self.cache[key] = megatrain_cli.resultslib.schema.loads(p.stdout)
        return self.cache[key]


def expand_keys(path):
    """[(config key, configuration)] of a sweep file (a path from the repo root): parts.step_keys'."""
    return [(sweeps.config_key(c), c) for c in sweeps.expand(sweeps.load(os.path.join(REPO, path)))]


def setup_s(params):
    return params * SETUP_NS_PER_PARAM_CORE * 1e-9 / GPU_CORES + PROCESS_S


def config_s(P, c):
    """(seconds, basis) of one sweep configuration on the GPU machine."""
    if c.get("expect_s"):
        return float(c["expect_s"]), "expect_s"
    if c.get("peer"):
        d = P.plan(c, c["layers"], schedule="zero3", precision="paper")
        n = c["steps"] - 1  # warm-up + timed: a peer has no extra last step
        step = d["step_ms"] / 1e3
        if c["peer"] == "fsdp2_offload":
            step += d["params"] * TORCH_ADAM_NS_PER_PARAM * 1e-9
        return n * step + setup_s(d["params"]), "peer"
    if c["mode"] == "extrapolated":
        t = 0.0
        hold = {c["layers_holdout"]} if c["layers_holdout"] != sweeps.NO_HOLDOUT else set()
        for L in sorted(set(c["layers_fit"]) | hold):
            d = P.plan(c, L)
            t += c["steps"] * d["step_ms"] / 1e3 + setup_s(d["params"])
        return t, "plan"
    if c["mode"] == "measured":
        d = P.plan(c, c["layers"])
        if not d.get("fits") or not d.get("step_ms"):
            return float(c["timeout_s"]), "timeout (plan: does not fit)"
        return c["steps"] * d["step_ms"] / 1e3 + setup_s(d["params"]), "plan"
    return 2.0, "sim"  # a projection: seconds of CPU


def step_s(P, st, left=None):
    """(seconds, basis) of a step; a sweep given `left` seconds stops before the first
    configuration that no longer fits (run.py --deadline), and says which it leaves out."""
    if st["kind"] == "sweep":
        s = sweeps.load(os.path.join(REPO, st["sweep"]))
        keys = st.get("keys") or parts.step_keys(st, expand_keys)
        cs = [c for c in sweeps.expand(s) if not keys or sweeps.config_key(c) in keys]
        t, runs, cut, kinds = 0.0, 0, [], set()
        for c in cs:
            x, k = config_s(P, c)
            if left is not None and (cut or t + x > left - 5):
                cut.append(sweeps.label(c))
                continue
            t, runs = t + x, runs + 1
            kinds.add(k)
        how = " and ".join(sorted({"expect_s": "their expect_s (measured wall, or the sweep's allowance)",
                                   "peer": f"megatrain plan ({HARDWARE}, our model of the peer)",
                                   "plan": f"megatrain plan ({HARDWARE})"}.get(k, k) for k in kinds)) or "-"
        basis = f"{runs} of {len(cs)} configurations from {how}" if cut else f"{len(cs)} configurations from {how}"
        if cut:
            basis += "; not reached in the budget: " + ", ".join(cut)
        return t, basis
    t = st.get("allow_s", 0)
    if st["kind"] == "peers" and st.get("basis"):
        return t, st["basis"]
    if st["kind"] == "peers":
        return t, ("measured 53 s for pip + DeepSpeed's cpu_adam JIT build; the official code's prepare "
                   "beside it: an allowance" if st.get("official") else "measured 53 s: pip + cpu_adam JIT build")
    return t, st.get("basis") or "allowance (parts.py ALLOW_*)"


def part(P, p):
    budget = p.get("budget_s", RUNNER_PART_BUDGET_S)
    steps_end = budget - RUNNER_PACK_RESERVE_S  # as runner.run_part gives the steps their time
    rows, used = [("start", START_S, "measured about 30 s (2026-11-25); described as 1-2 min (docs/REFERENCE.md#the-lent-gpu-machine)")], 0.0
    for st in p["steps"]:
        left = steps_end - used
        t, basis = step_s(P, st, left if st["kind"] == "sweep" else None)
        capped = max(0.0, min(t, st["timeout_s"], left))
        rows.append((st["name"], capped, basis + (f"; {t:.0f} s capped at its limit" if capped < t else "")))
        used += capped
    rows.append(("pack", PACK_S, "measured about 1 s"))
    return sum(t for _, t, _ in rows), rows


def minutes(seconds):
    return int(math.ceil(seconds / 60.0))
