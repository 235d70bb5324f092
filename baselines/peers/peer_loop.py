"""peer_loop.py: the peers' training loop (common.py re-exports it): one torch step
(forward, backward, clipping, AdamW), the timed run of warm-up and timed steps, and the
per-phase times beside them. torch is imported where used.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from peer_base import GRAD_CLIP, T0, PeerError, log
from peer_data import TokenBatches
from peer_results import report
from resultslib import median


class Phases:
    """Per-step phase times, each bracketed by a device synchronize (so a phase's queued GPU
    work is charged to it, not to the next). The sync costs a few microseconds per phase, a
    small price for knowing where a peer's step goes: forward, backward, optimizer."""

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
    timed = [r for r in rows if not r.get("warmup")]
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
    if device is not None and str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def run_timed(step_fn: Callable, batches: TokenBatches, *, warmup: int, steps: int,
              device=None, label: str = "", phases: Optional[Phases] = None) -> tuple:
    """Runs warmup + steps steps; each timed from a synchronized start to a
    synchronized end, the batch fetch and host-to-device copy included.
    step_fn(x, y) -> (loss, grad_norm); with `phases` (the Phases step_fn marks), each
    log row also has the step's phase times. Returns (timed step seconds, log rows)."""
    times, rows = [], []
    for i in range(warmup + steps):
        _sync(device)
        t0 = time.perf_counter()
        x, y = batches.next_batch(device)
        loss, gn = step_fn(x, y)
        _sync(device)
        dt = time.perf_counter() - t0
        lv = float(loss.detach().float().item()) if hasattr(loss, "detach") else float(loss)
        gv = None
        if gn is not None:
            g = gn.full_tensor() if hasattr(gn, "full_tensor") else gn
            gv = float(g.float().item()) if hasattr(g, "item") else float(g)
        r = {"step": i + 1, "warmup": i < warmup, "loss": lv, "grad_norm": gv,
             "tokens": batches.B * batches.T, "step_ms": dt * 1000.0}
        if phases is not None:
            r.update(phases.take())
        rows.append(r)
        log("%s step %d/%d%s loss %.4f grad_norm %s %.1f ms"
            % (label, i + 1, warmup + steps, " (warm-up)" if i < warmup else "",
               lv, "%.3f" % gv if gv is not None else "-", dt * 1000.0))
        if lv != lv:  # NaN
            raise PeerError("loss is NaN at step %d" % (i + 1))
        if i >= warmup:
            times.append(dt)
    return times, rows


def run_and_report(a, prog: str, system: str, spec, n_params: int, step_fn: Callable, batches: TokenBatches,
                   device, phases: Phases, timings: dict) -> dict:
    """A torch peer's timed steps on the GPU, then its row (report): setup ends here
    (timings' total_s, from T0), the peak is the GPU memory torch allocated."""
    import torch
    timings["total_s"] = time.time() - T0
    times, rows = run_timed(step_fn, batches, warmup=a.warmup, steps=a.steps, device=device, label=prog,
                            phases=phases)
    return report(a, prog, system, spec, n_params, times, int(torch.cuda.max_memory_allocated()),
                  extras=phase_fields(rows, timings))
