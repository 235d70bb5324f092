#!/usr/bin/env python3
"""The log of the official MegaTrain examples/sft/train.py, read into our results row.

    python3 -m baselines.peers.official_parse --log run.log --config CFG.json \
        --batch B --seq-len T [--layers N] [--warmup 2] [--out results/x.jsonl]

(megatrain_official.py runs the code and calls the same functions; this CLI re-reads a
saved log.) The format is that of train.py at the pinned commit (919520f), whose
logger prints, through logging's "%(asctime)s [%(levelname)s] %(message)s", per step:

    Step {step+1}/{num_steps} | Loss {loss:.4f} | Avg {avg:.4f}
      Time: {step_time:.2f}s | Tokens/s {tps:.1f} | TFLOPS {tflops:.1f}
      FWD: {fwd:.2f}s | BWD: {bwd:.2f}s
      GPU: {peak:.2f}GB peak (alloc {a:.2f}GB / reserved {r:.2f}GB)
      CPU: {rss:.2f}GB

and, before the loop, "Using DeepSpeed CPUAdam optimizer (SIMD-accelerated)" or "Using
PyTorch AdamW optimizer", "Model loaded. Attention implementation: X", "Starting
training...". step_time is time.perf_counter() around forward_and_backward (which ends
in torch.cuda.synchronize()), clip_grad_norm_, optimizer.step(), the copy of the
updated weights into the pinned flats (_sync_params_to_gpu) and zero_grad; the batch
fetch is outside it. FWD/BWD are CUDA-event times inside forward_and_backward.

Each step's time is taken as B*T / Tokens/s (printed to 0.1 token/s, so about five
significant digits) rather than Time (two decimals of a second); the two must agree to
the printed precision, or the log is refused. The first --warmup steps are dropped.
tflops/mfu are recomputed with OUR 6*N_all formula; the log's own TFLOPS (which uses
the same formula, N = the parameters its optimizer holds) is kept beside it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys

from . import common
from .common import PeerError

PROG = "official_parse"
_F = r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|nan|inf))"
RE_STEP = re.compile(r"\bStep (\d+)/(\d+) \| Loss " + _F)
RE_TIME = re.compile(r"\bTime: " + _F + r"s \| Tokens/s " + _F + r" \| TFLOPS " + _F)
RE_PHASE = re.compile(r"\bFWD: " + _F + r"s \| BWD: " + _F + r"s")
RE_GPU = re.compile(r"\bGPU: " + _F + r"GB peak")
RE_CPU = re.compile(r"^\S+ \[INFO\]\s+CPU: " + _F + r"GB\s*$")
RE_ATTN = re.compile(r"Model loaded\. Attention implementation: (\S+)")
STARTED = "Starting training..."
OPTIMIZERS = {"Using DeepSpeed CPUAdam optimizer": "deepspeed_cpu_adam",
              "Using PyTorch AdamW optimizer": "torch_adamw"}


def parse_log(text: str) -> dict:
    """{"steps": [{step, loss, time_s, tokens_per_s, tflops, fwd_s, bwd_s, gpu_gb,
    cpu_gb}], "optimizer", "attn", "started"} from the log text."""
    out = {"steps": [], "optimizer": None, "attn": None, "started": False}
    cur = None
    for line in text.splitlines():
        for k, v in OPTIMIZERS.items():
            if k in line:
                out["optimizer"] = v
        if STARTED in line:
            out["started"] = True
        m = RE_ATTN.search(line)
        if m:
            out["attn"] = m.group(1)
        m = RE_STEP.search(line)
        if m:
            cur = {"step": int(m.group(1)), "loss": float(m.group(3))}
            out["steps"].append(cur)
            continue
        if cur is None:
            continue
        m = RE_TIME.search(line)
        if m:
            cur.update(time_s=float(m.group(1)), tokens_per_s=float(m.group(2)), tflops=float(m.group(3)))
        m = RE_PHASE.search(line)
        if m:
            cur.update(fwd_s=float(m.group(1)), bwd_s=float(m.group(2)))
        m = RE_GPU.search(line)
        if m:
            cur["gpu_gb"] = float(m.group(1))
        m = RE_CPU.search(line)
        if m:
            cur["cpu_gb"] = float(m.group(1))
    return out


def step_seconds(s: dict, tokens: int) -> float:
    """One step's time: tokens / Tokens/s, checked against the 2-decimal Time."""
    if "time_s" not in s:
        raise PeerError("step %d has no 'Time:' line" % s["step"])
    t = tokens / s["tokens_per_s"] if s["tokens_per_s"] > 0 else s["time_s"]
    if abs(t - s["time_s"]) > 0.006 + 1e-3 * t:
        raise PeerError("step %d: Time %.2fs and %d tokens at %.1f tokens/s (%.4fs) disagree: "
                        "is --batch/--seq-len the run's?" % (s["step"], s["time_s"], tokens, s["tokens_per_s"], t))
    return t


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def timed_summary(parsed: dict, *, batch: int, seq_len: int, warmup: int) -> dict:
    """The timed steps' seconds and the extra fields of the row (phases, the log's own
    figures, loss), or a PeerError saying what is missing."""
    steps = parsed["steps"]
    if not steps:
        raise PeerError("no 'Step i/N' lines in the log (did train.py start training?)")
    for s in steps:
        if s["loss"] != s["loss"]:
            raise PeerError("loss is NaN at step %d" % s["step"])
    timed = steps[warmup:]
    if not timed:
        raise PeerError("%d step(s) in the log, none left after %d warm-up" % (len(steps), warmup))
    tokens = batch * seq_len
    secs = [step_seconds(s, tokens) for s in timed]
    ms = lambda k: _median([s.get(k) for s in timed])  # noqa: E731
    fwd, bwd = ms("fwd_s"), ms("bwd_s")
    # the rest of the step: clip, the CPU optimizer, the copy into the pinned flats, zero_grad
    rest = _median([t - s["fwd_s"] - s["bwd_s"] for t, s in zip(secs, timed) if "fwd_s" in s])
    gpu = [s["gpu_gb"] for s in steps if "gpu_gb" in s]
    cpu = [s["cpu_gb"] for s in steps if "cpu_gb" in s]
    extra = {
        "phases_ms": {"forward": fwd * 1e3 if fwd is not None else None,
                      "backward": bwd * 1e3 if bwd is not None else None,
                      "optimizer_and_rest": rest * 1e3 if rest is not None else None},
        "log_tflops_median": ms("tflops"),
        "loss_first": steps[0]["loss"], "loss_last": steps[-1]["loss"],
        "steps_logged": len(steps), "optimizer": parsed["optimizer"], "attn": parsed["attn"],
    }
    return {"step_s": secs, "extra": extra,
            "peak_gpu_bytes": int(max(gpu) * 2**30) if gpu else None,
            "peak_host_bytes": int(max(cpu) * 2**30) if cpu else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog=PROG)
    ap.add_argument("--log", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=common.MIN_WARMUP)
    ap.add_argument("--experiment", default="peers")
    ap.add_argument("--system", default="megatrain_official")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    common.check_out(a.out, [a.log, a.config])  # the row never appended to the log it parses
    try:
        with open(a.log, errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise PeerError("%s: cannot read log (%s)" % (a.log, e.strerror))
    spec = common.load_config(a.config, a.layers)
    got = timed_summary(parse_log(text), batch=a.batch, seq_len=a.seq_len, warmup=a.warmup)
    precision = "paper" if got["extra"]["optimizer"] == "deepspeed_cpu_adam" else "bf16"
    row = common.make_row(
        experiment=a.experiment, system=a.system, model=spec.name, params=common.count_params_meta(spec),
        layers_run=spec.layers_run, layers_model=spec.layers_model, batch=a.batch, seq_len=a.seq_len,
        precision=precision, step_times_s=got["step_s"], peak_gpu=got["peak_gpu_bytes"],
        peak_host=got["peak_host_bytes"], env=common.collect_env())
    row["official"] = got["extra"]
    common.emit_row(a.out, row)
    return 0


if __name__ == "__main__":
    common.main_guard(main, PROG)
