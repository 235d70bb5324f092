"""peer_loop.py: the peers' training loop (common.py re-exports it): one torch step
(forward, backward, clipping, AdamW), the timed run under the one timing rule
(harness/resultslib/timing.py), and the per-phase times of a separate phases run.
torch is imported where used.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from harness.resultslib import PHASES, RATIO, TIMING_RULE, median, steady_steps, total_steps

from .peer_base import GRAD_CLIP, T0, PeerError, log
from .peer_data import TokenBatches
from .peer_results import report


class Phases:
    """Per-step phase times, each bracketed by a device synchronize (so a phase's queued GPU
    work is charged to it, not to the next). The synchronizes stop work crossing the phases
    (ZeRO-3's prefetch across forward and backward), so only a separate run (--phases,
    its row marked timing "phases") uses them, never one whose times give a ratio."""

    def __init__(self, device=None):
        self.device, self.t, self.cur = device, None, {}

    def start(self) -> None:
        _sync(self.device)
        self.t, self.cur = time.perf_counter(), {}

    def mark(self, name: str) -> None:
        _sync(self.device)
        now = time.perf_counter()
        self.cur[name] = (now - self.t) * 1000.0
        self.t = now

    def take(self) -> dict:
        cur, self.cur = self.cur, {}
        return cur


def phase_fields(rows, setup: dict) -> dict:
    """The row's extra fields: medians over the timed steps of each phase (fwd_ms, bwd_ms,
    optimizer_ms), setup_s (process start to the first step) and its parts (setup)."""
    timed = [r for r in rows if not r.get("warmup") and not r.get("last")]
    out = {}
    for k in ("fwd_ms", "bwd_ms", "optimizer_ms"):
        v = [r[k] for r in timed if isinstance(r.get(k), (int, float))]
        out[k] = median(v) if v else None
    out["setup_s"] = setup.get("total_s")
    out["setup"] = {k: round(v, 2) for k, v in setup.items() if k != "total_s"}
    return out


def train_step_torch(loss_model, optimizer, params, x, y, clip: float = GRAD_CLIP, phases=None):
    """One step as every torch-optimizer peer runs it (plain torch and FSDP2):
    forward + backward, clip_grad_norm_ on the global L2 norm, AdamW step.
    Returns (loss, grad_norm) as tensors (no host sync here unless `phases` times them:
    fwd_ms, bwd_ms, optimizer_ms = clipping + AdamW + zero_grad)."""
    import torch
    if phases:
        phases.start()
    loss = loss_model(x, y)
    if phases:
        phases.mark("fwd_ms")
    loss.backward()
    if phases:
        phases.mark("bwd_ms")
    gn = torch.nn.utils.clip_grad_norm_(params, clip) if clip and clip > 0 else None
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if phases:
        phases.mark("optimizer_ms")
    return loss, gn


def _sync(device) -> None:
    import torch
    if _cuda(device):
        torch.cuda.synchronize()


def _cuda(device) -> bool:
    import torch
    return device is not None and str(device).startswith("cuda") and torch.cuda.is_available()


class _Clock:
    """Step boundaries without a synchronize: CUDA events on the current stream (recorded as
    the host reaches them, timed as the device does), host clock readings on the CPU."""

    def __init__(self, device, n: int):
        import torch
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(n)] if _cuda(device) else None
        self.host = [0.0] * n

    def mark(self, i: int) -> None:
        self.host[i] = time.perf_counter()
        if self.events is not None:
            self.events[i].record()

    def step_ms(self, i: int) -> float:
        if self.events is not None:
            return float(self.events[i].elapsed_time(self.events[i + 1]))
        return (self.host[i + 1] - self.host[i]) * 1000.0


def _value(t) -> Optional[float]:
    if t is None:
        return None
    t = t.full_tensor() if hasattr(t, "full_tensor") else t
    return float(t.detach().float().item()) if hasattr(t, "detach") else float(t)


def run_timed(step_fn: Callable, batches: TokenBatches, *, warmup: int, steps: int,
              device=None, label: str = "", phases: Optional[Phases] = None) -> tuple:
    """The timing rule (harness/resultslib/timing.py, the one megatrain's rows follow): the
    batches of warmup + steps + 1 steps made and staged before the window; the device
    synchronized at the window's edges only; step boundaries from _Clock (no synchronize);
    losses and gradient norms read after the window. The timed steps are steady_steps:
    after the warm-up, without the last. step_fn(x, y) -> (loss, grad_norm); with `phases`
    (the Phases step_fn marks: a synchronize per phase) each row also has its phase times,
    and the run is a phases run (its row is marked so, never a ratio's).
    Returns (timed step seconds, log rows, window) with window = {"ms": the synchronized
    window's wall time, "steps": its step count}."""
    n = total_steps(warmup, steps)
    staged = batches.stage(n, device)
    clock, out, ph = _Clock(device, n + 1), [], []
    _sync(device)
    t0 = time.perf_counter()
    for i, (x, y) in enumerate(staged):
        clock.mark(i)
        loss, gn = step_fn(x, y)
        out.append((loss.detach() if hasattr(loss, "detach") else loss, gn))
        ph.append(phases.take() if phases is not None else {})
    clock.mark(n)
    _sync(device)
    window = {"ms": (time.perf_counter() - t0) * 1000.0, "steps": n}
    ms = [clock.step_ms(i) for i in range(n)]
    rows = []
    for i, ((loss, gn), p) in enumerate(zip(out, ph)):
        lv, gv = _value(loss), _value(gn)
        r = {"step": i + 1, "warmup": i < warmup, "last": i == n - 1, "loss": lv, "grad_norm": gv,
             "tokens": batches.B * batches.T, "step_ms": ms[i]}
        r.update(p)
        rows.append(r)
        log("%s step %d/%d%s loss %.4f grad_norm %s %.1f ms"
            % (label, i + 1, n, " (warm-up)" if i < warmup else " (last, not timed)" if i == n - 1 else "",
               lv, "%.3f" % gv if gv is not None else "-", ms[i]))
        if lv != lv:  # NaN
            raise PeerError("loss is NaN at step %d" % (i + 1))
    times = [m / 1000.0 for m in steady_steps(ms, warmup)]
    return times, rows, window


def timing_fields(rows, window: dict, phases: bool) -> dict:
    """What a peer's row says of its timing: the rule, whether it may give a ratio, every
    step's time (warm-up and last included), the synchronized window and the losses."""
    return {"timing_rule": TIMING_RULE, "timing": PHASES if phases else RATIO,
            "step_ms_all": [round(r["step_ms"], 3) for r in rows], "window_ms": round(window["ms"], 3),
            "loss_first": rows[0]["loss"], "loss_last": rows[-1]["loss"]}


def run_and_report(a, prog: str, system: str, spec, n_params: int, step_fn: Callable, batches: TokenBatches,
                   device, phases: Optional[Phases], timings: dict, extras: Optional[dict] = None) -> dict:
    """A torch peer's timed steps on the GPU, then its row (report): setup ends here
    (timings' total_s, from T0), the peak is the GPU memory torch allocated. `phases`
    (None unless --phases) makes it a phases run; `extras` (the peer's own fields: its
    configuration, threads, the work it does) join the row."""
    import torch
    timings["total_s"] = time.time() - T0
    times, rows, window = run_timed(step_fn, batches, warmup=a.warmup, steps=a.steps, device=device, label=prog,
                                    phases=phases)
    fields = dict(phase_fields(rows, timings), **timing_fields(rows, window, phases is not None))
    fields.update(extras or {})
    return report(a, prog, system, spec, n_params, times, int(torch.cuda.max_memory_allocated()), extras=fields)
