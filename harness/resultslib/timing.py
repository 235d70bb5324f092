"""The one timing rule every system's step times follow (megatrain's rows and the peers'):
docs/DESIGN.md#metrics. Both sides call steady_steps on their per-step times.

  * the batches are made (and, for a device, pinned) before the window opens: making the
    data is not the system's step (megatrain's CLI reads its next batch outside its clock);
  * `warmup` steps, then the timed ones, then one last step: the statistics are over the
    steps after the warm-up, without the last (megatrain's last step carries the final
    optimizer pass that no next step overlaps; a peer's last step is dropped alike);
  * no synchronization inside a timed step beyond what the system itself does: the device
    is synchronized at the window's edges only, step boundaries are device events (they
    add no synchronization), losses are read after the window;
  * per-phase times (a synchronize between phases) come from a separate run, marked
    timing "phases"; no ratio, figure or claim is taken from such a row (rows.ok).
"""

RULE = "steady-window/2"  # what rows record as timing_rule; version 1 was the per-step synchronize
RATIO, PHASES = "ratio", "phases"  # a row's `timing`: its times may give a ratio, or carry phase timers


def steady_steps(step_ms, warmup):
    """The per-step times the statistics are taken over: after `warmup`, without the last."""
    if warmup < 0 or len(step_ms) < warmup + 2:
        raise ValueError(f"{len(step_ms)} steps: the timing rule needs warm-up ({warmup}) + at least 2")
    return list(step_ms[warmup:-1])


def total_steps(warmup, timed):
    """How many steps a run makes for `timed` steady steps: the warm-up, those, and the last."""
    return warmup + timed + 1
