#!/usr/bin/env python3
"""run.py: runs one sweep (experiments/sweeps/NAME.json) and writes one results row
per configuration to results/<experiment>.jsonl (docs/DESIGN.md#results).

    python3 harness/sweep/run.py experiments/sweeps/c2_cpu.json [--bin DIR]
        [--out-dir results] [--force] [--only SUBSTR] [--dry-run] [--timeout S]
        [--hardware PROFILE]

The sweep owns its file: a run rewrites it from the sweep, so rows of entries that
no longer exist (or of another --hardware override) are dropped.

Modes (the row's `mode` is always set, never inferred by a reader):
  measured        `megatrain train` on a real backend (cpu, cuda)
  extrapolated    `megatrain train` at >= 2 truncated depths (real width) and one
                  held-out depth; step time fitted linear in layers, reported at the
                  model's full depth with the error the held-out check gives
  projected       `megatrain train --backend sim --hardware H` (virtual time), plus
                  `megatrain plan` for feasibility and memory
  projected-plan  `megatrain plan --hardware H` only (the analytic model); the row's
                  mode is `projected` and its `backend` is `plan`
A configuration with "peer" runs a real peer instead (baselines/peers/PEER.py, mode
measured): its row is made the same way, with the system the peer names.
Resumable: a configuration whose key is already in the output file is skipped
(unless --force). A failing configuration is recorded with an `error` field and
the sweep goes on; the exit status is 1 if any configuration failed in this run.
Progress and ETA go to stderr. See harness/sweep/README.md for the sweep format.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import sweeps  # noqa: E402
from common import REPO, RESULTS_SCHEMA, die, median  # noqa: E402
from sweeps import config_key, expand, label, schedule_args, system  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import metrics  # noqa: E402  (harness/metrics.py: the metrics and the dense-peak table, defined once)

# Options `megatrain plan` does not take (train-only), with the number of values each
# takes; dropped from args for plan calls. None today: plan prices --attention (the
# profile's measured rate of that implementation) and --serial-optimizer (the update
# after backward, no speculative restore window) as train runs them.
PLAN_DROP_FLAGS = {}
MEMORY_REFUSAL = re.compile(r"device memory|host memory|cannot allocate|out of memory", re.I)


# ---------------------------------------------------------------- running the CLI
class RunError(Exception):
    pass


def plan_args(args):
    """A configuration's extra arguments less those `megatrain plan` does not take."""
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
        elif a in PLAN_DROP_FLAGS:
            skip = PLAN_DROP_FLAGS[a]
        else:
            out.append(a)
    return out


class Unreached(Exception):
    """A configuration not run, cleanly: no time left, its peer absent or skipped (exit 77)."""


def run_cmd(cmd, timeout, want_stderr=False):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(f"timed out after {timeout} s: {' '.join(cmd)}")
    except OSError as e:
        raise RunError(f"cannot run {cmd[0]}: {e}")
    if p.returncode != 0:
        last = [l for l in p.stderr.strip().splitlines() if l.strip()]
        if p.returncode == 77:  # CTest's skip: what the command needs is absent here (a peer's checkout)
            raise Unreached(f"skipped (exit 77): {last[-1] if last else '(no message)'}")
        raise RunError(f"exit {p.returncode}: {last[-1] if last else '(no message)'}")
    return (p.stdout, p.stderr) if want_stderr else p.stdout


class Runner:
    def __init__(self, bindir, tmpdir, timeout=None):
        self.mt = os.path.join(bindir, "megatrain")
        self.env_bin = os.path.join(bindir, "mt-env")
        self.tmp = tmpdir
        self.timeout = timeout
        self.deadline = None    # --deadline: no command runs past it
        self.last_stderr = ""  # the last train's stderr (its "ready in S s" line)
        self.env_cache = {}
        for b in (self.mt, self.env_bin):
            if not os.access(b, os.X_OK):
                die(f"{b}: not found or not executable; HINT: build first (make build) or pass --bin DIR / MT_BIN")

    def env(self, hardware):
        name = os.path.basename(str(hardware)).removesuffix(".json") if hardware else None
        if name not in self.env_cache:
            cmd = [self.env_bin] + (["--hardware-profile", name] if name else [])
            try:
                self.env_cache[name] = json.loads(run_cmd(cmd, 120))
            except (RunError, json.JSONDecodeError) as e:
                die(f"mt-env failed: {e}")
        return dict(self.env_cache[name])

    def model_config(self, c, layers):
        """Path of the config to run: the original, or a temp copy with overrides and depth."""
        src = os.path.join(REPO, c["model"]) if not os.path.isabs(c["model"]) else c["model"]
        with open(src) as f:
            cfg = json.load(f)
        cfg.update(c["overrides"] or {})
        layers_model = int(cfg["num_hidden_layers"])
        if not c["overrides"] and layers in (None, layers_model):
            return src, layers_model, layers_model
        cfg["num_hidden_layers"] = int(layers or layers_model)
        if "max_window_layers" in cfg:
            cfg["max_window_layers"] = min(int(cfg["max_window_layers"]), cfg["num_hidden_layers"])
        h = hashlib.sha1(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]
        path = os.path.join(self.tmp, f"config-{h}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path, int(cfg["num_hidden_layers"]), layers_model

    def limit(self, c):
        """A command's time limit: the configuration's (or --timeout), cut at --deadline."""
        t = self.timeout or c["timeout_s"]
        if self.deadline is not None:
            t = min(t, max(1, int(self.deadline - time.time())))
        return t

    def plan(self, c, cfg_path, hardware=None):
        cmd = [self.mt, "plan", "--config", cfg_path, "--batch", str(c["batch"]), "--seq-len", str(c["seq_len"]),
               "--precision", c["precision"], *schedule_args(c), "--grad-accum", str(c["grad_accum"])]
        if hardware:
            cmd += ["--hardware", str(hardware)]
        if c["host_mem_gb"]:
            cmd += ["--host-mem-gb", str(c["host_mem_gb"])]
        cmd += plan_args(c["args"])
        out = run_cmd(cmd, self.limit(c))
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            raise RunError(f"plan printed no JSON object: {out[:200]!r}")

    def train(self, c, cfg_path, trace=None):
        if c["cli"] == "default":  # the no-argument run: embedded model, corpus and settings
            cmd = [self.mt]
        else:
            cmd = [self.mt, "train", "--config", cfg_path, "--init", "random", "--seed", str(c["seed"]),
                   "--data", "synthetic", "--batch", str(c["batch"]), "--seq-len", str(c["seq_len"]),
                   "--steps", str(c["steps"]), "--precision", c["precision"], *schedule_args(c),
                   "--grad-accum", str(c["grad_accum"]), "--backend", c["backend"]]
            if c["hardware"]:
                cmd += ["--hardware", str(c["hardware"])]
            if trace:
                cmd += ["--trace", trace]
            cmd += list(c["args"])
        out, self.last_stderr = run_cmd(cmd, self.limit(c), want_stderr=True)
        steps = []
        for line in out.splitlines():
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                if "step" in d and "step_ms" in d:
                    steps.append(d)
        if len(steps) != c["steps"]:
            raise RunError(f"train printed {len(steps)} step lines, expected {c['steps']}")
        return steps


# ---------------------------------------------------------------- metrics
def step_stats(steps, warmup):
    """docs/DESIGN.md#metrics: median over the steps after the warm-up, with min and max. The last
    step is left out of the steady state: it ends the run with the optimizer pass that
    no next step overlaps (the CLI counts it in that step), so it is reported apart."""
    timed = [s["step_ms"] for s in steps[warmup:-1]]
    return {"median": median(timed), "min": min(timed), "max": max(timed), "n": len(timed)}


def dense_peak(gpu_name):
    """Dense bf16 peak of a measured GPU, for MFU (harness/dense_peaks.json)."""
    return metrics.dense_peak_tflops(gpu_name)


def linfit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


# ---------------------------------------------------------------- one configuration
def blank_row(experiment, c, env, sweep_file=None, override=None):
    return {"schema": RESULTS_SCHEMA, "experiment": experiment, "system": system(c),
            "mode": "projected" if c["mode"] == "projected-plan" else c["mode"],
            "model": sweeps.model_name(c),
            "params": None, "layers_run": None, "layers_model": None, "batch": c["batch"],
            "seq_len": c["seq_len"], "precision": c["precision"], "step_ms": None,
            "tokens_per_s": None, "tflops": None, "mfu": None, "gpu_busy_frac": None, "h2d_gbps": None,
            "peak_gpu_bytes": None, "peak_host_bytes": None, "env": env,
            "backend": c["backend"], "hardware": os.path.basename(str(c["hardware"])).removesuffix(".json") if c["hardware"] else None,
            "variant": c["variant"], "fits": None, "tokens": None, "days_per_billion_tokens": None,
            "mfu_peak_tflops": None, "gpu_busy_source": None, "config_key": config_key(c),
            # the sweep that owns the row (a re-run of it rewrites the row's file)
            "sweep": {"file": sweep_file, "hardware_override": override},
            # what the top-level fields do not already say
            "config": {k: c[k] for k in ("model", "overrides", "layers", "layers_fit", "layers_holdout", "args", "peer",
                                         "grad_accum", "host_mem_gb", "steps", "warmup", "cli")
                       if c.get(k) not in (None, [], {})}}


def finish_speed(row, tokens, n_all, peak):
    med = row["step_ms"]["median"]
    row["tokens"] = tokens
    row["tokens_per_s"] = metrics.tokens_per_s(tokens, med)
    row["tflops"] = metrics.tflops(n_all, tokens, med)
    row["days_per_billion_tokens"] = metrics.days_per_billion_tokens(row["tokens_per_s"])
    row["mfu_peak_tflops"] = peak
    row["mfu"] = metrics.mfu(row["tflops"], peak)


def cli_medians(row, timed):
    """Medians of the CLI's per-step fields over the timed steps; gpu_busy_frac also
    with its min and max (the noise allowance of a verdict on it)."""
    cli_busy = [s["gpu_busy_frac"] for s in timed if isinstance(s.get("gpu_busy_frac"), (int, float))]
    cli_h2d = [s["h2d_gbps"] for s in timed if isinstance(s.get("h2d_gbps"), (int, float))]
    if cli_busy:
        row["gpu_busy_frac"], row["gpu_busy_source"] = median(cli_busy), "cli"
        row["gpu_busy_range"] = [min(cli_busy), max(cli_busy)]
    if cli_h2d:
        row["h2d_gbps"] = median(cli_h2d)
    for k in ("opt_wait_ms", "drain_wait_ms", "compute_ms", "h2d_ms", "d2h_ms", "drain_ms", "optimizer_ms",
              "d2h_gbps"):
        v = [s[k] for s in timed if isinstance(s.get(k), (int, float))]
        if v:
            row[k] = median(v)


READY = re.compile(r"ready in ([0-9.]+) s")


def startup_s(stderr):
    """megatrain's time to its first step, from its stderr line `megatrain: ready in 12.3 s (...)`;
    None when the binary prints none (older builds)."""
    m = READY.search(stderr or "")
    return float(m.group(1)) if m else None


def params_from_cli(steps):
    """N as the CLI counted it, from its own tflops = 6 N tokens / step time (the
    default run has no config file to plan)."""
    s = steps[0]
    return int(round(s["tflops"] * 1e12 * (s["step_ms"] / 1e3) / (6.0 * s["tokens"])))


# What a peer's row may add to the keys of docs/DESIGN.md#results (baselines/peers/common.py, report): the medians
# over the timed steps of its forward, backward and optimizer step (optimizer_ms as megatrain's
# rows name their host optimizer), and its setup before the first step, with the parts of it.
PEER_PHASES = ("fwd_ms", "bwd_ms", "optimizer_ms", "setup_s", "setup")


def peers_dir():
    """Where the peer scripts are: $MT_PEERS_DIR (tests), else baselines/peers."""
    return os.environ.get("MT_PEERS_DIR") or os.path.join(REPO, "baselines", "peers")


def run_peer(R, row, c):
    """A real peer (baselines/peers/PEER.py) on the configuration: the same model (depth cut
    with --layers), batch, sequence and timing rule (c.warmup untimed steps, then the
    steady-state count of a megatrain row: steps - warmup - 1); its row's timings become
    this row, the metrics recomputed here as for every row, the env from mt-env."""
    src, _, layers_model = R.model_config(c, None)
    script = os.path.join(peers_dir(), c["peer"] + ".py")
    if not os.path.isfile(script):  # a peer still being written, or left out of this tree
        where = os.path.relpath(script, REPO) if script.startswith(REPO + os.sep) else script
        raise Unreached(f"skipped: {where} is not in this tree")
    cmd = [sys.executable, script, "--config", src,
           "--batch", str(c["batch"]), "--seq-len", str(c["seq_len"]), "--warmup", str(c["warmup"]),
           "--steps", str(c["steps"] - c["warmup"] - 1), "--seed", str(c["seed"]), "--precision", c["precision"],
           "--experiment", row["experiment"]]
    if c["layers"] not in (None, layers_model):
        cmd += ["--layers", str(c["layers"])]
    out = run_cmd(cmd + list(c["args"]), R.limit(c))
    got = [json.loads(l) for l in out.splitlines() if l.strip().startswith("{") and '"schema"' in l]
    if not got:
        raise RunError(f"{c['peer']} printed no results row")
    p = got[-1]
    s = p.get("step_ms") or {}
    if not all(isinstance(s.get(k), (int, float)) for k in ("median", "min", "max")):
        raise RunError(f"{c['peer']}: its row has no step_ms")
    row["system"], row["backend"], row["precision"] = p["system"], "cuda", p["precision"]
    row["params"], row["layers_run"], row["layers_model"] = p["params"], p["layers_run"], p["layers_model"]
    row["step_ms"] = {"median": s["median"], "min": s["min"], "max": s["max"], "n": c["steps"] - c["warmup"] - 1}
    row["fits"] = True
    row["peak_gpu_bytes"], row["peak_host_bytes"] = p.get("peak_gpu_bytes"), p.get("peak_host_bytes")
    row["peer"] = {"script": os.path.relpath(cmd[1], REPO) if cmd[1].startswith(REPO) else cmd[1],
                   "system": p["system"], "torch_cuda": (p.get("env") or {}).get("cuda")}
    for k in PEER_PHASES:  # its per-phase medians and setup time, where the peer reports them
        if p.get(k) is not None:
            row[k] = p[k]
    off = p.get("official")
    if isinstance(off, dict):  # megatrain_official.py: its per-phase medians and setup inside "official"
        row["official"] = off
        ph = off.get("phases_ms") or {}
        for k, name in (("fwd_ms", "forward"), ("bwd_ms", "backward")):
            if row.get(k) is None and isinstance(ph.get(name), (int, float)):
                row[k] = ph[name]
        if row.get("setup") is None and isinstance(off.get("setup_s"), dict):
            row["setup"] = off["setup_s"]
    finish_speed(row, c["batch"] * c["seq_len"], row["params"], dense_peak(row["env"].get("gpu_name")))
    return row


def run_config(R, experiment, c, sweep_file=None, override=None):
    env = R.env(c["hardware"] if c["mode"] in ("projected", "projected-plan") else None)
    row = blank_row(experiment, c, env, sweep_file, override)
    if c.get("peer") and c["mode"] == "measured":  # a real peer; projected peers run megatrain --peer
        return run_peer(R, row, c)
    tokens = c["batch"] * c["seq_len"] * c["grad_accum"]
    mode = c["mode"]
    profile = common.hardware_profile(str(c["hardware"])) if c["hardware"] else None
    profile_peak = profile["gpu"]["peak_tflops"]["bf16"] if profile else None

    if c["cli"] == "default":
        steps = R.train(c, None)
        row["system"], row["backend"] = "megatrain", "auto"
        row["params"] = params_from_cli(steps)
        row["batch"], row["seq_len"], row["precision"] = None, None, None  # the CLI's defaults, not the sweep's
        row["step_ms"] = step_stats(steps, c["warmup"])
        row["step_ms_all"] = [s["step_ms"] for s in steps]
        row["step_ms_last"] = steps[-1]["step_ms"]
        row["loss_first"], row["loss_last"] = steps[0]["loss"], steps[-1]["loss"]
        row["steps_run"] = len(steps)
        row["fits"] = True
        rss = [s["peak_rss_bytes"] for s in steps if isinstance(s.get("peak_rss_bytes"), (int, float))]
        row["peak_host_bytes"] = max(rss) if rss else None
        finish_speed(row, steps[0]["tokens"], row["params"], None)
        return row

    if mode in ("measured", "projected"):
        cfg_path, layers_run, layers_model = R.model_config(c, c["layers"])
        row["layers_run"], row["layers_model"] = layers_run, layers_model
        plan = R.plan(c, cfg_path, c["hardware"] if mode == "projected" else None)
        row["params"] = plan["params"]
        if mode == "projected":
            row["plan"] = plan_summary(plan)
            row["fits"] = bool(plan["fits"])
            row["peak_host_bytes"], row["peak_gpu_bytes"] = plan["host_bytes"], plan["gpu_bytes"]
            if not plan["fits"]:
                row["note"] = "does not fit (megatrain plan): " + short_text(plan)
                return row
        trace = os.path.join(R.tmp, f"trace-{row['config_key']}.json") if c["keep_trace"] else None
        try:
            steps = R.train(c, cfg_path, trace)
        except RunError as e:
            # The engine refused for memory although the plan said it fits: a result
            # (fits: false) plus a flag for the planner's owner, not a crash of the sweep.
            if mode == "projected" and MEMORY_REFUSAL.search(str(e)):
                row["fits"], row["plan_mismatch"] = False, True
                row["note"] = "megatrain plan said it fits, the engine refused: " + str(e)
                print(f"  WARNING: plan/engine disagree on memory: {e}", file=sys.stderr)
                return row
            raise
        if trace:  # kept next to the results: <out-dir>/traces/
            rel = os.path.join("traces", f"{experiment}-{row['config_key']}.json")
            os.makedirs(os.path.join(R.out_dir, "traces"), exist_ok=True)
            shutil.copyfile(trace, os.path.join(R.out_dir, rel))
            row["trace"] = rel
        row["step_ms"] = step_stats(steps, c["warmup"])
        row["step_ms_all"] = [s["step_ms"] for s in steps]  # every step, warm-up and last included
        row["step_ms_last"] = steps[-1]["step_ms"]
        if mode == "measured":
            row["fits"] = True
            row["startup_s"] = startup_s(R.last_stderr)
            row["loss_first"], row["loss_last"] = steps[0]["loss"], steps[-1]["loss"]
            rss = [s["peak_rss_bytes"] for s in steps if isinstance(s.get("peak_rss_bytes"), (int, float))]
            row["peak_host_bytes"] = max(rss) if rss else None
            gpu = [s["peak_gpu_bytes"] for s in steps if isinstance(s.get("peak_gpu_bytes"), (int, float))]
            row["peak_gpu_bytes"] = max(gpu) if gpu else None
            peak = dense_peak(env.get("gpu_name")) if c["backend"] == "cuda" else None
        else:
            peak = profile_peak
        finish_speed(row, tokens, row["params"], peak)
        cli_medians(row, steps[c["warmup"]:-1])
        return row

    if mode == "projected-plan":
        cfg_path, layers_run, layers_model = R.model_config(c, c["layers"])
        row["layers_run"], row["layers_model"] = layers_run, layers_model
        plan = R.plan(c, cfg_path, c["hardware"])
        row["params"] = plan["params"]
        row["plan"] = plan_summary(plan)
        row["fits"] = bool(plan["fits"])
        row["peak_host_bytes"], row["peak_gpu_bytes"] = plan["host_bytes"], plan["gpu_bytes"]
        if not plan["fits"]:
            row["note"] = "does not fit (megatrain plan): " + short_text(plan)
            return row
        ms = plan["step_ms"]
        row["step_ms"] = {"median": ms, "min": ms, "max": ms, "n": 1}
        finish_speed(row, tokens, row["params"], profile_peak)
        pred = plan.get("prediction") or {}
        if isinstance(pred.get("compute_ms"), (int, float)) and ms > 0:
            row["gpu_busy_frac"], row["gpu_busy_source"] = min(1.0, pred["compute_ms"] / ms), "plan"
        return row

    # extrapolated: real width, truncated depths, step time linear in layers.
    _, _, layers_model = R.model_config(c, None)
    full_path, _, _ = R.model_config(c, layers_model)
    row["layers_model"] = layers_model
    row["layers_run"] = layers_model  # the depth the row reports; the fit's depths are in `fit`
    row["params"] = R.plan(c, full_path)["params"]
    check = c.get("layers_check")
    if check is not None and check != layers_model:
        raise RunError(f"layers_check {check} is not the model's full depth {layers_model}")
    runs, per_round = measure_depths(R, c, sorted(set(c["layers_fit"]) | {c["layers_holdout"]}
                                                   | ({check} if check else set())))
    row["step_ms"], row["fit"] = extrapolate(runs, sorted(c["layers_fit"]), c["layers_holdout"], layers_model,
                                             per_round, check)
    fit_rss = [runs[d]["rss"] for d in row["fit"]["depths"]]
    if all(v is not None for v in fit_rss):
        ra, rb = linfit(row["fit"]["depths"], fit_rss)
        row["peak_host_bytes"] = int(ra + rb * layers_model)
        row["fit"]["peak_host_bytes"] = fit_rss
    row["fits"] = None  # not known from shallow runs: see `megatrain plan`
    peak = dense_peak(env.get("gpu_name")) if c["backend"] == "cuda" else None
    finish_speed(row, tokens, row["params"], peak)
    return row


def measure_depths(R, c, depths):
    """Runs every depth `rounds` times, interleaved (round r: all depths, in alternating
    order), so that what else runs on a shared machine falls on every depth alike
    instead of on whichever depth happened to run during it: the fit then measures
    depth, not the load. Returns {depth: {stats over all timed steps of all rounds,
    rss}} and, per round, {depth: median of that round's timed steps}."""
    paths = {d: R.model_config(c, d)[0] for d in depths}
    timed = {d: [] for d in depths}
    rss = {d: None for d in depths}
    per_round = []
    for r in range(c.get("rounds") or 1):
        med = {}
        for d in (depths if r % 2 == 0 else depths[::-1]):
            steps = R.train(c, paths[d])
            t = [s["step_ms"] for s in steps[c["warmup"]:-1]]  # step_stats' steady state
            timed[d] += t
            med[d] = median(t)
            got = [s["peak_rss_bytes"] for s in steps if isinstance(s.get("peak_rss_bytes"), (int, float))]
            if got:
                rss[d] = max(got + ([rss[d]] if rss[d] is not None else []))
        per_round.append(med)
    runs = {d: {"stats": {"median": median(timed[d]), "min": min(timed[d]), "max": max(timed[d]),
                          "n": len(timed[d])}, "rss": rss[d]} for d in depths}
    return runs, per_round


def extrapolate(runs, depths, holdout, L, per_round=None, check=None):
    """Step time fitted linear in depth over `depths` (medians), reported at depth L with
    an error bar from the method's own held-out check: the fit predicts the held-out
    depth h, and its error there grows with the distance from the fitted depths' mean
    x, as the error of a fitted slope does: err(L) = err(h) (L - x) / (h - x). The
    timing noise of the runs (half the min..max spread over the median, the largest
    of them) is added in quadrature, and with >= 2 interleaved rounds so is the spread
    of the rounds' own predictions at L (half their min..max over the prediction): how
    much the machine's load moved the answer. step_ms.min and .max are median -/+ that
    error: a band around the median, never outside it. With `check` (the full depth L,
    measured in the same rounds) the row also says how far the prediction fell from it."""
    med = [runs[d]["stats"]["median"] for d in depths]
    a, b = linfit(depths, med)
    pred_L = a + b * L
    if b <= 0 or pred_L <= 0:  # timing noise larger than a layer's cost: nothing to extrapolate
        raise RunError(f"the fit over depths {depths} ({', '.join(f'{m:.1f}' for m in med)} ms) gives "
                       f"{b:.2f} ms per layer and {pred_L:.1f} ms at {L} layers: no extrapolation")
    h = holdout
    meas_h = runs[h]["stats"]["median"]
    pred_h = a + b * h
    xbar = sum(depths) / len(depths)
    lever = abs((L - xbar) / (h - xbar))
    err_h = (pred_h - meas_h) / meas_h  # signed, relative, at the held-out depth
    err_L = abs(pred_h - meas_h) * lever / pred_L
    noise = max((r["stats"]["max"] - r["stats"]["min"]) / (2 * r["stats"]["median"]) for r in runs.values())
    round_preds = []
    for pr in per_round or []:
        ra, rb = linfit(depths, [pr[d] for d in depths])
        round_preds.append(ra + rb * L)
    spread = (max(round_preds) - min(round_preds)) / (2 * pred_L) if len(round_preds) >= 2 else 0.0
    E = (err_L ** 2 + noise ** 2 + spread ** 2) ** 0.5
    step = {"median": pred_L, "min": max(0.0, pred_L * (1 - E)), "max": pred_L * (1 + E),
            "n": min(runs[d]["stats"]["n"] for d in depths), "err_frac": E}
    fit = {"depths": depths, "step_ms": med, "intercept_ms": a, "per_layer_ms": b,
           "step_ms_min": [runs[d]["stats"]["min"] for d in depths],
           "step_ms_max": [runs[d]["stats"]["max"] for d in depths],
           "holdout": {"depth": h, "measured_ms": meas_h, "predicted_ms": pred_h, "err_frac": err_h,
                       "lever": lever, "measured_min_ms": runs[h]["stats"]["min"],
                       "measured_max_ms": runs[h]["stats"]["max"]},
           "noise_frac": noise, "err_frac": E, "rounds": len(per_round or []) or 1,
           "err_method": "held-out depth: |predicted - measured| x (L - mean fitted depth) / (h - mean fitted depth), "
                         "with the runs' timing noise and the interleaved rounds' spread at L in quadrature"}
    if len(round_preds) >= 2:
        fit["round_predicted_ms"], fit["round_spread_frac"] = round_preds, spread
    if check is not None:
        m = runs[check]["stats"]
        fit["check"] = {"depth": check, "measured_ms": m["median"], "measured_min_ms": m["min"],
                        "measured_max_ms": m["max"], "predicted_ms": a + b * check,
                        "err_frac": (a + b * check) / m["median"] - 1,
                        "how": "measured at full depth in the same interleaved rounds as the fit"}
    return step, fit


def plan_summary(plan):
    keep = ("fits", "host_bytes", "pinned_bytes", "gpu_bytes", "step_ms", "tokens_per_s", "tflops", "bound",
            "short", "max_seq_len", "bytes_per_param")
    s = {k: plan[k] for k in keep if k in plan}
    if "host" in plan and "have_bytes" in plan["host"]:
        s["host_have_bytes"] = plan["host"]["have_bytes"]
    return s


def short_text(plan):
    parts = []
    for s in plan.get("short") or []:
        parts.append(f"{s.get('resource')} needs {s.get('need_bytes', 0) / 2**30:.1f} GiB, has "
                     f"{s.get('have_bytes', 0) / 2**30:.1f} GiB")
    return "; ".join(parts) or "no reason given"


# ---------------------------------------------------------------- main
def host_load():
    """The host's 1-minute load average (/proc/loadavg), None where unknown."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def fmt_s(s):
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep", nargs="+", help="sweep JSON file(s)")
    ap.add_argument("--bin", help="directory of megatrain and mt-env (default $MT_BIN or build/bin)")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "results"), help="results directory (default results/)")
    ap.add_argument("--force", action="store_true", help="re-run configurations already in the results file")
    ap.add_argument("--only", help="run only configurations whose label contains this string")
    ap.add_argument("--dry-run", action="store_true", help="list the configurations and exit")
    ap.add_argument("--timeout", type=int, help="per-command time limit in seconds (default: per config, 900)")
    ap.add_argument("--hardware", help="replace the hardware profile of every projected configuration "
                    "(e.g. h200-128g when the GPU sweeps run on the H200 machine)")
    ap.add_argument("--deadline", type=float, help="epoch seconds: a configuration whose expect_s no longer fits "
                    "before it is not started (reported as not reached), and no command runs past it")
    ap.add_argument("--skip-peer", action="append", default=[], metavar="PEER=REASON",
                    help="do not run this peer's configurations, reporting them as not reached for REASON "
                    "(its setup failed or was skipped)")
    args = ap.parse_args()
    skip_peers = {}
    for x in args.skip_peer:
        name, _, why = x.partition("=")
        skip_peers[name] = why or "skipped"
    args.skip_peers = skip_peers

    todo_sweeps = []
    for p in args.sweep:
        s = sweeps.with_hardware(sweeps.load(p), args.hardware)
        todo_sweeps.append((s, expand(s)))

    if args.dry_run:
        for s, cs in todo_sweeps:
            for c in cs:
                print(f"{s['experiment']}\t{c['mode']}\t{config_key(c)}\t{label(c)}")
        return 0

    os.makedirs(args.out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="mt-sweep-")
    failed = 0
    try:
        R = Runner(common.bin_dir(args.bin), tmp, args.timeout)
        R.out_dir = args.out_dir
        R.deadline = args.deadline
        for s, cs in todo_sweeps:
            failed += run_sweep(R, s, cs, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        print(f"sweep: {failed} configuration(s) failed (rows with an 'error' field)", file=sys.stderr)
    return 1 if failed else 0


def run_sweep(R, s, cs, args):
    """Runs one sweep into <out-dir>/<experiment>.jsonl. The sweep owns its file: rows
    whose configuration is no longer in the sweep (a removed or changed entry, another
    experiment, another hardware override) are dropped, and the file is rewritten in
    the sweep's order after every configuration (one atomic rename each)."""
    exp, out = s["experiment"], os.path.join(args.out_dir, s["experiment"] + ".jsonl")
    keys = [config_key(c) for c in cs]
    old = {}
    dropped = 0
    for r in common.load_jsonl(out):
        if r.get("experiment") == exp and r.get("config_key") in keys:
            old[r["config_key"]] = r  # the last row of a key wins (files from before ownership)
        else:
            dropped += 1
            if r.get("trace") and os.path.exists(os.path.join(args.out_dir, r["trace"])):
                os.remove(os.path.join(args.out_dir, r["trace"]))  # its trace goes with it
    todo = [c for c in cs if (not args.only or args.only in label(c))]
    skip = [c for c in todo if config_key(c) in old and not args.force]
    todo = [c for c in todo if c not in skip]
    print(f"sweep {exp}: {len(cs)} configurations, {len(skip)} already in {out}, {len(todo)} to run"
          + (f"; {dropped} row(s) of entries no longer in the sweep dropped" if dropped else ""), file=sys.stderr)
    common.write_jsonl(out, [old[k] for k in keys if k in old])
    sweep_file, override = sweeps.rel_path(s["_path"]), args.hardware
    failed, t_start = 0, time.time()
    unreached = []  # configurations not run, with why: <out-dir>/<experiment>.unreached.json
    for i, c in enumerate(todo, 1):
        t0 = time.time()
        why = not_reached(R, c, getattr(args, "skip_peers", {}))
        if why:
            unreached.append({"label": label(c), "config_key": config_key(c), "reason": why})
            write_unreached(args.out_dir, exp, unreached)
            print(f"  [{i}/{len(todo)}] {label(c)}: not reached: {why}", file=sys.stderr)
            continue
        load0 = host_load()
        try:
            row = run_config(R, exp, c, sweep_file, override)
        except Unreached as e:
            unreached.append({"label": label(c), "config_key": config_key(c), "reason": str(e),
                              "seconds": round(time.time() - t0, 1)})
            write_unreached(args.out_dir, exp, unreached)
            print(f"  [{i}/{len(todo)}] {label(c)}: not reached: {e}", file=sys.stderr)
            continue
        except (RunError, KeyError, ValueError, ZeroDivisionError, OSError) as e:
            row = blank_row(exp, c, R.env(c["hardware"] if c["mode"].startswith("projected") else None),
                            sweep_file, override)
            row["error"] = str(e) if isinstance(e, RunError) else f"{type(e).__name__}: {e}"
            failed += 1
        row["wall_s"] = round(time.time() - t0, 3)
        # the 1-minute load average before and after: how much else ran beside a measured row
        row["host_load"] = [load0, host_load()] if load0 is not None else None
        old[row["config_key"]] = row
        common.write_jsonl(out, [old[k] for k in keys if k in old])
        el = time.time() - t_start
        eta = el / i * (len(todo) - i)
        what = ("ERROR " + row["error"]) if "error" in row else (
            f"{row['step_ms']['median']:.1f} ms/step" + (f" (+/-{100 * row['step_ms']['err_frac']:.0f}%)"
                                                        if "err_frac" in row["step_ms"] else "")
            if row["step_ms"] else ("does not fit" if row.get("fits") is False else "no timing"))
        print(f"  [{i}/{len(todo)}] {label(c)}: {what}  ({time.time() - t0:.1f} s, ETA {fmt_s(eta)})",
              file=sys.stderr)
    write_unreached(args.out_dir, exp, unreached)
    return failed


def not_reached(R, c, skip_peers):
    """Why a configuration is not started, or None: its peer's setup failed, or what its
    expect_s says it needs no longer fits before --deadline."""
    if c.get("peer") in skip_peers:
        return f"{c['peer']}: {skip_peers[c['peer']]}"
    if R.deadline is not None:
        left = R.deadline - time.time()
        need = c.get("expect_s") or 30
        if left < need:
            return f"no time left: it needs about {need:.0f} s, {max(0, left):.0f} s were left"
    return None


def write_unreached(out_dir, exp, unreached):
    """The configurations this run did not reach (not JSON lines: no results rows), rewritten
    whole; removed when there are none."""
    path = os.path.join(out_dir, exp + ".unreached.json")
    if not unreached:
        if os.path.exists(path):
            os.remove(path)
        return
    with open(path + ".tmp", "w") as f:
        json.dump(unreached, f, indent=1)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
