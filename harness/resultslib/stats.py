"""Step statistics (the median over the timed steps, with min and max; a row's noise band),
and the host's load beside them."""
from .timing import steady_steps


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def spread(xs, n=False):
    """{"median", "min", "max"} of the values (and "n", their count, when asked)."""
    out = {"median": median(xs), "min": min(xs), "max": max(xs)}
    if n:
        out["n"] = len(xs)
    return out


def noise(r, what="step"):
    """Relative noise of a row: half its min..max spread over the median (step time,
    or gpu_busy_frac when asked and recorded)."""
    if what == "busy" and r.get("gpu_busy_range") and r.get("gpu_busy_frac"):
        lo, hi = r["gpu_busy_range"]
        return (hi - lo) / (2 * r["gpu_busy_frac"])
    s = r.get("step_ms") or {}
    if not s.get("median"):
        return 0.0
    return (s["max"] - s["min"]) / (2 * s["median"])


def step_stats(steps, warmup):
    """docs/DESIGN.md#metrics: median over the steps after the warm-up, with min and max. The last
    step is left out of the steady state: it ends the run with the optimizer pass that
    no next step overlaps (the CLI counts it in that step), so it is reported apart."""
    return spread(steady_steps([s["step_ms"] for s in steps], warmup), n=True)


def load_avg():
    """The host's 1-minute load average (/proc/loadavg), recorded beside timings taken on
    a shared machine; None where unknown."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
