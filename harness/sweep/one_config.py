"""one_config.py: one configuration of a sweep into its results row (harness/sweep/run.py):
measured, extrapolated, projected (sim) or projected-plan, the default run, or a real peer.
"""
import os
import re
import sys

from .. import metrics  # harness/metrics.py: the metrics and the dense-peak table, defined once
from . import sweeps
from .common import REPO, RESULTS_SCHEMA, median
from .cost_sources import cost_sources
from .extrapolate import extrapolate, linfit, measure_depths
from .megatrain_cli import RunError, Unreached, batch_auto_choice, run_cmd
from .. import resultslib
from ..resultslib import step_stats
from .sweeps import config_key, system

MEMORY_REFUSAL = re.compile(r"device memory|host memory|cannot allocate|out of memory", re.I)


# ---------------------------------------------------------------- one configuration
def blank_row(experiment, c, env, sweep_file=None, override=None):
    row = {"schema": RESULTS_SCHEMA, "experiment": experiment, "system": system(c),
           "mode": "projected" if c["mode"] == "projected-plan" else c["mode"],
           "model": sweeps.model_name(c),
           "params": None, "layers_run": None, "layers_model": None,
           # a batch megatrain chooses ("auto") is known once train has run: null until then
           "batch": None if c["batch"] == sweeps.AUTO else c["batch"],
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
    if os.environ.get("MT_CAMPAIGN_CALL"):  # the GPU campaign's call that made it (filing binds it to its manifest)
        row["campaign_call"] = os.environ["MT_CAMPAIGN_CALL"]
    return row


def finish_speed(row, tokens, n_all, peak, cfg_path=None):
    """The row's throughput metrics (core/METRICS.md): tflops and mfu on 6 N_all (the official
    code's), and, from the model's config at the row's depth, model_tflops and model_mfu on
    model FLOPs (no input embedding, causal attention included)."""
    med = row["step_ms"]["median"]
    row["tokens"] = tokens
    row["tokens_per_s"] = metrics.tokens_per_s(tokens, med)
    row["tflops"] = metrics.tflops(n_all, tokens, med)
    row["days_per_billion_tokens"] = metrics.days_per_billion_tokens(row["tokens_per_s"])
    row["mfu_peak_tflops"] = peak
    row["mfu"] = metrics.mfu(row["tflops"], peak)
    if cfg_path and row.get("layers_run") and row.get("seq_len"):
        with open(cfg_path) as f:
            fpt = metrics.model_flops_of_config(resultslib.schema.loads(f.read()), n_all, row["layers_run"], row["seq_len"])
        row["model_flops_per_token"] = fpt
        row["model_tflops"] = metrics.model_tflops(fpt, tokens, med)
        row["model_mfu"] = metrics.mfu(row["model_tflops"], peak)


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
# ... and what it says of its timing and its work (baselines/peers/peer_loop.py, timing_fields;
# peer_model.work_fields; deepspeed_zero3.ds_fields): every step's time, the window, the losses,
# the recompute and loss-head passes where they differ from megatrain's, DeepSpeed's knobs.
PEER_FIELDS = ("step_ms_all", "window_ms", "loss_first", "loss_last", "work", "work_differs", "ds")


def stamp_timing(row, timing=resultslib.RATIO):
    """The timing rule a row's times follow (resultslib/timing.py), and whether they may
    give a ratio (a phases run's may not)."""
    row["timing_rule"], row["timing"] = resultslib.TIMING_RULE, timing


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
    # the peers are modules of baselines.peers, the repo on PYTHONPATH whatever the working
    # folder; a test's stand-in in $MT_PEERS_DIR is a plain script
    cmd = [sys.executable, script] if os.environ.get("MT_PEERS_DIR") else \
        [sys.executable, "-m", "baselines.peers." + c["peer"]]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    cmd += ["--config", src,
            "--batch", str(c["batch"]), "--seq-len", str(c["seq_len"]), "--warmup", str(c["warmup"]),
            "--steps", str(c["steps"] - c["warmup"] - 1), "--seed", str(c["seed"]), "--precision", c["precision"],
            "--experiment", row["experiment"]]
    if c["layers"] not in (None, layers_model):
        cmd += ["--layers", str(c["layers"])]
    out = run_cmd(cmd + list(c["args"]), R.limit(c), env=env)
    try:  # strictly: a NaN or Infinity is no figure (resultslib.schema)
        got = [resultslib.schema.loads(l) for l in out.splitlines() if l.strip().startswith("{") and '"schema"' in l]
    except ValueError as e:
        raise RunError(f"{c['peer']} printed a row that is not JSON ({e})")
    if not got or not isinstance(got[-1], dict):
        raise RunError(f"{c['peer']} printed no results row")
    p = got[-1]
    s = p.get("step_ms") or {}
    if not all(isinstance(s.get(k), (int, float)) for k in ("median", "min", "max")):
        raise RunError(f"{c['peer']}: its row has no step_ms")
    bad = resultslib.schema.step_ms_problems(s)
    if bad:
        raise RunError(f"{c['peer']}: its row's " + "; ".join(bad))
    row["system"], row["backend"], row["precision"] = p["system"], "cuda", p["precision"]
    row["params"], row["layers_run"], row["layers_model"] = p["params"], p["layers_run"], p["layers_model"]
    rule = p.get("timing_rule")
    if rule not in (None, resultslib.TIMING_RULE):  # a peer timed by another rule is no ratio's peer
        raise RunError(f"{c['peer']}: its row follows timing rule {rule!r}, not {resultslib.TIMING_RULE} "
                       f"(harness/resultslib/timing.py)")
    stamp_timing(row, p.get("timing") or resultslib.RATIO)
    if rule is None:  # a peer timing itself in its own loop (the official code): said, not assumed
        row["timing_rule"] = None
    row["step_ms"] = {"median": s["median"], "min": s["min"], "max": s["max"], "n": c["steps"] - c["warmup"] - 1}
    row["fits"] = True
    row["peak_gpu_bytes"], row["peak_host_bytes"] = p.get("peak_gpu_bytes"), p.get("peak_host_bytes")
    row["peer"] = {"script": os.path.relpath(cmd[1], REPO) if cmd[1].startswith(REPO) else cmd[1],
                   "system": p["system"], "torch_cuda": (p.get("env") or {}).get("cuda")}
    for k in PEER_PHASES + PEER_FIELDS:  # its per-phase medians, setup, timing and work, where it reports them
        if p.get(k) is not None:
            row[k] = p[k]
    if p.get("attention_impl"):  # the attention the peer ran (megatrain_official.py: flash_attention_2 or sdpa)
        row["attention_impl"] = p["attention_impl"]
    off = p.get("official")
    if isinstance(off, dict):  # megatrain_official.py: its per-phase medians and setup inside "official"
        row["official"] = off
        ph = off.get("phases_ms") or {}
        for k, name in (("fwd_ms", "forward"), ("bwd_ms", "backward")):
            if row.get(k) is None and isinstance(ph.get(name), (int, float)):
                row[k] = ph[name]
        if row.get("setup") is None and isinstance(off.get("setup_s"), dict):
            row["setup"] = off["setup_s"]
    finish_speed(row, c["batch"] * c["seq_len"], row["params"], metrics.dense_peak_tflops(row["env"].get("gpu_name")),
                 R.model_config(c, row["layers_run"])[0])
    return row


def run_config(R, experiment, c, sweep_file=None, override=None):
    env = R.env(c["hardware"] if c["mode"] in ("projected", "projected-plan") else None)
    row = blank_row(experiment, c, env, sweep_file, override)
    if c.get("peer") and c["mode"] == "measured":  # a real peer; projected peers run megatrain --peer
        return run_peer(R, row, c)
    auto = c["batch"] == sweeps.AUTO  # the batch is megatrain's choice: known once train has run
    tokens = None if auto else c["batch"] * c["seq_len"] * c["grad_accum"]
    mode = c["mode"]
    profile = resultslib.hardware_profile(str(c["hardware"])) if c["hardware"] else None
    profile_peak = profile["gpu"]["peak_tflops"]["bf16"] if profile else None

    if c["cli"] == "default":
        steps = R.train(c, None)
        row["system"], row["backend"] = "megatrain", "auto"
        row["params"] = params_from_cli(steps)
        row["batch"], row["seq_len"], row["precision"] = None, None, None  # the CLI's defaults, not the sweep's
        row["step_ms"] = step_stats(steps, c["warmup"])
        stamp_timing(row)
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
        cfg_path, plan = planned(R, row, c, c["hardware"] if mode == "projected" else None)
        if mode == "projected" and not projection_fits(row, plan):
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
        if auto:
            chose_auto(row, steps, c, plan, R.last_stderr)
            tokens = row["batch"] * c["seq_len"] * c["grad_accum"]
        if trace:  # kept next to the results: <out-dir>/traces/
            rel = os.path.join("traces", f"{experiment}-{row['config_key']}.json")
            # whole (a temp file, then a rename), and never through a traces/ link leading out
            resultslib.safepath.copy_into(trace, R.out_dir, rel, "trace")
            row["trace"] = rel
        row["step_ms"] = step_stats(steps, c["warmup"])
        stamp_timing(row)
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
            peak = metrics.dense_peak_tflops(env.get("gpu_name")) if c["backend"] == "cuda" else None
        else:
            peak = profile_peak
            if c["backend"] == "sim" and not c.get("peer"):
                row["cost_sources"] = projection_sources(c)
        finish_speed(row, tokens, row["params"], peak, cfg_path)
        cli_medians(row, steps[c["warmup"]:-1])
        return row

    if mode == "projected-plan":
        cfg_path, plan = planned(R, row, c, c["hardware"])
        if not projection_fits(row, plan):
            return row
        ms = plan["step_ms"]
        row["step_ms"] = {"median": ms, "min": ms, "max": ms, "n": 1}
        ranks = plan.get("ranks")  # plan --gpus N --hosts H: the machine's peak is N*H GPUs' (mfu per GPU)
        if ranks:
            profile_peak *= ranks["gpus"] * ranks["hosts"]
            row["ranks"] = {k: ranks[k] for k in ("gpus", "hosts", "batch_per_gpu", "tflops_per_gpu",
                                                  "one_gpu_tokens_per_s", "scaling_efficiency", "bound",
                                                  "host_bytes_per_host", "host0_bytes")}
        finish_speed(row, tokens, row["params"], profile_peak, cfg_path)
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
    hold = None if c["layers_holdout"] == sweeps.NO_HOLDOUT else c["layers_holdout"]
    runs, per_round, failed = measure_depths(R, c, sorted(set(c["layers_fit"]) | ({hold} if hold else set())
                                                          | ({check} if check else set())),
                                             optional=(hold,) if hold else ())
    # a held-out depth that failed (memory, time): the fitted depths still make the row, its
    # bar then the fit's alone, and the row says which depth failed and why
    row["step_ms"], row["fit"] = extrapolate(runs, sorted(c["layers_fit"]), None if hold in failed else hold,
                                             layers_model, per_round, check)
    if hold in failed:
        row["fit"]["holdout_failed"] = {"depth": hold, "error": failed[hold]}
    stamp_timing(row)  # each depth's run timed under the rule, the fit over their medians
    fit_rss = [runs[d]["rss"] for d in row["fit"]["depths"]]
    if all(v is not None for v in fit_rss):
        ra, rb = linfit(row["fit"]["depths"], fit_rss)
        row["peak_host_bytes"] = int(ra + rb * layers_model)
        row["fit"]["peak_host_bytes"] = fit_rss
    row["fits"] = None  # not known from shallow runs: see `megatrain plan`
    peak = metrics.dense_peak_tflops(env.get("gpu_name")) if c["backend"] == "cuda" else None
    finish_speed(row, tokens, row["params"], peak, full_path)
    return row


def projection_sources(c):
    """{kind: [figure...]}: what a sim projection rests on (cost_sources.py), for the profile,
    precision and attention implementation the configuration runs."""
    args = list(c["args"])
    attn = args[args.index("--attention") + 1] if "--attention" in args[:-1] else "auto"
    if attn == "auto":
        attn = "native" if c["precision"] == "fp32" else "cudnn"
    if resultslib.hardware_profile(str(c["hardware"])) is None:
        return None
    return cost_sources(str(c["hardware"]), c["precision"], attn)["by_kind"]


def chose_auto(row, steps, c, plan, stderr):
    """A batch 'auto' row: the batch train ran (its tokens per step, checked against its
    '--batch auto:' line) and the knobs it chose (batch_auto.args: what sweeps.as_run adds to
    re-run the same step), beside `megatrain plan --batch auto`'s pick on the same profile."""
    chose = batch_auto_choice(stderr)
    ran = steps[0]["tokens"] // (c["seq_len"] * c["grad_accum"])
    if ran != chose["batch"] or steps[0]["tokens"] != ran * c["seq_len"] * c["grad_accum"]:
        raise RunError(f"train --batch auto said batch {chose['batch']} but ran {steps[0]['tokens']} tokens a step")
    row["batch"] = ran
    row["batch_auto"] = dict(chose, plan_batch=plan.get("batch"), plan_recompute=plan.get("recompute"))


def planned(R, row, c, hardware):
    """`megatrain plan` of the configuration at its depth (on `hardware`, else this machine):
    the row's depths and parameter count from it; returns (the config's path, the plan)."""
    cfg_path, layers_run, layers_model = R.model_config(c, c["layers"])
    row["layers_run"], row["layers_model"] = layers_run, layers_model
    plan = R.plan(c, cfg_path, hardware)
    row["params"] = plan["params"]
    return cfg_path, plan


def projection_fits(row, plan):
    """A projection's plan into its row (summary, fits, planned memory); False, with the
    row's note saying what is short, when it does not fit."""
    row["plan"] = plan_summary(plan)
    row["fits"] = bool(plan["fits"])
    row["peak_host_bytes"], row["peak_gpu_bytes"] = plan["host_bytes"], plan["gpu_bytes"]
    if not plan["fits"]:
        row["note"] = "does not fit (megatrain plan): " + short_text(plan)
    return row["fits"]


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
