"""span_check.py: where the sim's step differs from a measured one, span by span. A measured row
that kept its trace (`trace`, engine/trace.c's Chrome trace: GPU spans timed by CUDA events on
each stream, host spans by the clock) is compared with the sim's trace of the same configuration:
per lane, span name and kind of unit (a layer, or the embedding/head units), the median span
over the timed steps in each, and what the difference costs a step (the median difference times
the spans a step has). sim_check.py prints the largest and records them all in
results/sim_validation.json (`spans`).

A diagnosis, not a verdict: a span can be short in the sim because its kernels are priced too
fast (a layer's backward), or long in the measured trace because it waited inside (a copy queued
behind another on the same link, a host pass sharing cores with another); the step's error is
sim_check's verdict. Nothing here is fitted to or read into the cost model.
"""
import json
import statistics

EMBED_HEAD = "embedding/head"  # spans tagged layer -1: the embedding and head units


def timed_steps(c):
    """The step numbers (1-based, as the trace tags them) whose times the row's median is over:
    after the warm-up, without the last (one_config.py: steps[warmup:-1])."""
    return range(c["warmup"] + 1, c["steps"])


def spans(path, steps):
    """{(lane, name, units): [ms, ...]} of the trace's complete spans in `steps`."""
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    lanes = {e.get("tid"): (e.get("args") or {}).get("name") for e in ev
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    out = {}
    for e in ev:
        a = e.get("args") or {}
        if e.get("ph") != "X" or a.get("step") not in steps or not isinstance(e.get("dur"), (int, float)):
            continue
        units = "layers" if isinstance(a.get("layer"), int) and a["layer"] >= 0 else EMBED_HEAD
        key = (lanes.get(e.get("tid")) or f"lane {e.get('tid')}", e["name"], units)
        out.setdefault(key, []).append(e["dur"] / 1e3)  # Chrome trace: microseconds
    return out


def compare(measured_trace, sim_trace, c):
    """Spans found in both traces, the costliest difference a step first: [{lane, name, units,
    per_step, measured_ms, sim_ms, err}] (per_step: the measured trace's spans a step)."""
    steps = timed_steps(c)
    m, s = spans(measured_trace, steps), spans(sim_trace, steps)
    out = []
    for key in sorted(set(m) & set(s)):
        mm, sm = statistics.median(m[key]), statistics.median(s[key])
        if mm <= 0:
            continue
        out.append({"lane": key[0], "name": key[1], "units": key[2], "per_step": round(len(m[key]) / len(steps), 3),
                    "measured_ms": round(mm, 4), "sim_ms": round(sm, 4), "err": round(sm / mm - 1, 4)})
    return sorted(out, key=lambda d: -abs((d["sim_ms"] - d["measured_ms"]) * d["per_step"]))


def describe(d):
    return (f"{d['lane']}: {d['name']} ({d['units']}, {d['per_step']:g} a step) {d['measured_ms']:.1f} -> "
            f"{d['sim_ms']:.1f} ms ({100 * d['err']:+.0f}%)")
