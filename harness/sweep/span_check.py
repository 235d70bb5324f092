"""span_check.py: where the sim's step differs from a measured one, span by span. A measured row
that kept its trace (`trace`, engine/trace.c's Chrome trace: GPU spans timed by CUDA events on
each stream, host spans by the clock) is compared with the sim's trace of the same configuration:
per lane, span name and kind of unit (a layer, or the embedding/head units), the median span
over the timed steps in each, and what the difference costs a step (the median difference times
the spans a step has). sim_check.py prints the largest and records them all in
results/sim_validation.json (`spans`).

    python3 -m harness.sweep.span_check --export results/sim_validation.json --out plots/out
writes the data of plots/spans.gp (spans.tsv, spans.gpi): per configuration with spans, the
costliest span kinds as milliseconds a step, measured beside the sim.

Where the measured spans of a kind ran with different company on the lanes that share the host's
memory and the link (SHARED: the two copy streams, the drain, the optimizer), their medians are
also given per company (`beside`): a copy alone against the same copy while AdamW streams the
host's memory tells contention from a mispriced rate.

A diagnosis, not a verdict: a span can be short in the sim because its kernels are priced too
fast (a layer's backward), or long in the measured trace because it waited inside (a copy queued
behind another on the same link, a host pass sharing cores with another); the step's error is
sim_check's verdict. Nothing here is fitted to or read into the cost model.
"""
import argparse
import json
import os
import statistics
import sys

from ..resultslib import safepath, schema

EMBED_HEAD = "embedding/head"  # spans tagged layer -1: the embedding and head units


def timed_steps(c):
    """The step numbers (1-based, as the trace tags them) whose times the row's median is over:
    after the warm-up, without the last (one_config.py: steps[warmup:-1])."""
    return range(c["warmup"] + 1, c["steps"])


# The lanes that share the host's memory and the link: a span on one of them can be slowed by
# what runs on the others (a copy reads or writes host memory, a host pass streams it).
SHARED = ("h2d stream", "d2h stream", "host: gradient drain", "host: optimizer")


def events(path, steps):
    """[(key, start_ms, end_ms)] of the trace's complete spans in `steps`, key (lane, name, units)."""
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    lanes = {e.get("tid"): (e.get("args") or {}).get("name") for e in ev
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    out = []
    for e in ev:
        a = e.get("args") or {}
        if e.get("ph") != "X" or a.get("step") not in steps or not isinstance(e.get("dur"), (int, float)):
            continue
        units = "layers" if isinstance(a.get("layer"), int) and a["layer"] >= 0 else EMBED_HEAD
        key = (lanes.get(e.get("tid")) or f"lane {e.get('tid')}", e["name"], units)
        t0 = float(e.get("ts", 0)) / 1e3  # Chrome trace: microseconds
        out.append((key, t0, t0 + e["dur"] / 1e3))
    return out


def spans(path, steps):
    """{(lane, name, units): [ms, ...]} of the trace's complete spans in `steps`."""
    return durations(events(path, steps))


def durations(ev):
    out = {}
    for key, t0, t1 in ev:
        out.setdefault(key, []).append(t1 - t0)
    return out


def beside(ev):
    """{(lane, name, units): {(other lanes...): [ms, ...]}} for the spans (events()) on SHARED
    lanes: each filed under the other SHARED lanes busy for at least half of it (() when none was)."""
    by_lane = {}
    for key, t0, t1 in ev:
        by_lane.setdefault(key[0], []).append((t0, t1))
    out = {}
    for key, t0, t1 in ev:
        if key[0] not in SHARED or t1 <= t0:
            continue
        busy = tuple(sorted(lane for lane in SHARED if lane != key[0] and
                            sum(max(0.0, min(t1, b) - max(t0, a)) for a, b in by_lane.get(lane, ())) >= 0.5 * (t1 - t0)))
        out.setdefault(key, {}).setdefault(busy, []).append(t1 - t0)
    return out


def compare(measured_trace, sim_trace, c):
    """Spans found in both traces, the costliest difference a step first: [{lane, name, units,
    per_step, measured_ms, sim_ms, err, beside?}] (per_step: the measured trace's spans a step;
    beside, where the measured spans ran with different company: [{with, n, measured_ms}], the
    median of each group, the most spans first)."""
    steps = timed_steps(c)
    ev = events(measured_trace, steps)
    m, s, company = durations(ev), spans(sim_trace, steps), beside(ev)
    out = []
    for key in sorted(set(m) & set(s)):
        mm, sm = statistics.median(m[key]), statistics.median(s[key])
        if mm <= 0:
            continue
        d = {"lane": key[0], "name": key[1], "units": key[2], "per_step": round(len(m[key]) / len(steps), 3),
             "measured_ms": round(mm, 4), "sim_ms": round(sm, 4), "err": round(sm / mm - 1, 4)}
        groups = company.get(key, {})
        if len(groups) > 1:
            d["beside"] = sorted(({"with": list(w), "n": len(v), "measured_ms": round(statistics.median(v), 4)}
                                  for w, v in groups.items()), key=lambda g: (-g["n"], g["with"]))
        out.append(d)
    return sorted(out, key=lambda d: -abs((d["sim_ms"] - d["measured_ms"]) * d["per_step"]))


def describe_beside(d):
    """'weights in (layers): 13.5 ms beside host: optimizer (40), 10.0 alone (5)'."""
    parts = [f"{g['measured_ms']:.1f} ms " + ("beside " + " + ".join(g["with"]) if g["with"] else "alone")
             + f" ({g['n']})" for g in d["beside"]]
    return f"{d['name']} ({d['units']}): " + ", ".join(parts)


def describe(d):
    return (f"{d['lane']}: {d['name']} ({d['units']}, {d['per_step']:g} a step) {d['measured_ms']:.1f} -> "
            f"{d['sim_ms']:.1f} ms ({100 * d['err']:+.0f}%)")


PLOT_SPANS = 8  # span kinds per configuration in plots/spans.gp


def gp_str(x):
    return '"' + str(x).replace("\\", "\\\\").replace('"', '\\"') + '"'


def export(validation, out_dir):
    """plots/spans.gp's data from a sim_validation.json: spans.tsv, one block per configuration
    with spans (x index, span kind, measured and sim milliseconds a step), and spans.gpi (N,
    T[i]: the configuration, its step error and whether it validates the current engine)."""
    with open(validation) as f:
        v = schema.loads(f.read())  # strictly: a NaN error is no figure
    blocks, titles = [], []
    for prof, p in sorted(v.get("profiles", {}).items()):
        for c in p.get("configs", []):
            if not c.get("spans"):
                continue
            lines = ["# x\tspan\tmeasured_ms_a_step\tsim_ms_a_step"]
            for i, d in enumerate(c["spans"][:PLOT_SPANS]):
                label = f"{d['name']} ({d['units']})" if d["units"] != "layers" else d["name"]
                lines.append(f"{i}\t{label}\t{d['measured_ms'] * d['per_step']:.4f}\t{d['sim_ms'] * d['per_step']:.4f}")
            blocks.append("\n".join(lines))
            counted = "validates the current engine" if c["validates_current_engine"] else "older engine: not counted"
            titles.append(f"{c['key']} on {prof}: step {100 * c['err']:+.1f}% ({counted})")
    gpi = f"N = {len(blocks)}\n" + (f"array T[{len(blocks)}]\n" if blocks else "") + \
        "".join(f"T[{i + 1}] = {gp_str(t)}\n" for i, t in enumerate(titles))
    for name, text in (("spans.tsv", "\n\n\n".join(blocks) + "\n"), ("spans.gpi", gpi)):
        path = os.path.join(out_dir, name)
        safepath.refuse_own_input(path, [validation])
        safepath.write_bytes(path, text.encode())
    return len(blocks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--export", required=True, metavar="SIM_VALIDATION_JSON")
    ap.add_argument("--out", required=True, help="directory for spans.tsv and spans.gpi")
    a = ap.parse_args()
    try:
        for name in ("spans.tsv", "spans.gpi"):  # before anything is written
            safepath.refuse_own_input(os.path.join(a.out, name), [a.export])
        n = export(a.export, a.out)
    except safepath.PathError as e:
        print(f"span_check: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"span_check: {a.export}: {e}; HINT: make sim-check writes it", file=sys.stderr)
        return 1
    print(f"span_check: {n} configuration(s) with spans -> {os.path.join(a.out, 'spans.tsv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
