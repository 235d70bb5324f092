#!/usr/bin/env python3
"""claims.py: the claims table, computed from results/*.jsonl by the claim rows the
sweep files declare (`"claims"` in experiments/sweeps/*.json) — nothing here is a
hard-coded result, and no experiment is named here.

    python3 -m harness.sweep.claims [--results results] [--run DIR | --since UTC] [--markdown FILE] [--brief]
        [--allow-dirty]

Rows from a dirty (or unknown) tree and rows of sweep entries that no longer exist are
left out (said on stderr); --allow-dirty admits the dirty ones.

A claim row names a test (below) and the rows it reads (`where`, matched against the
row fields of its own experiment). Every test outcome is one of agrees, disagrees or
within noise, with a noise allowance from the runs' own spread: a row's relative noise
is half its step_ms min..max over the median (an extrapolated row's min..max is its
held-out error band), a ratio's is the sum of its rows'. The verdict then says what
kind of evidence it rests on:
  reproduced / not reproduced / inconclusive (within noise)   measured rows on a GPU only
  extrapolated (+/-E%): agrees|disagrees|within error          an extrapolated row took part
  pending GPU (projection agrees|disagrees|within noise)       a projection (sim or plan)
  by construction (why)                                        a projection whose model makes
                                                               the outcome certain
  CPU check (not the claim): ...                               measured on the CPU backend
  no verdict (why) / no data                                   nothing to test / no rows
Every row says where its figures come from ("source"): "this run" (rows of --run DIR, a run's
own results, which replace results/' rows of the same configuration; or rows made at or after
--since UTC) or "filed from <campaign
part or machine>, <date>, <commit>"; the table ends with a tally: reproduced here, reproduced
on a filed GPU row, projected, failed, pending (no data), other. --brief: a short table for a
terminal (claim, source, verdict).
Tests: fits, ratio, at_least, not_slower, largest_fit, extrapolation, predicted, ratios, value,
published, validation
(harness/sweep/README.md, "Claim rows").
"""
import argparse
import datetime
import glob
import json
import os
import re
import sys

from . import common, sweeps, trust
from .common import REPO, die
from .. import resultslib
from ..resultslib import field, matches, noise, ok  # noqa: F401 (noise: claims.noise, as before)
from ..resultslib import row_label as label  # the sim check's configuration names

TESTS = ("fits", "ratio", "at_least", "not_slower", "largest_fit", "extrapolation", "predicted", "ratios", "value",
         "published", "validation", "bound")


# ---------------------------------------------------------------- rows
# ok (a row with a timing), field (a dotted field), matches (a claim's `where`): resultslib's.


def enrich(r):
    """The row plus derived figures the claim templates use."""
    d = dict(r)
    d["params_B"] = (r.get("params") or 0) / 1e9
    d["peak_host_TB"] = (r.get("peak_host_bytes") or 0) / 1e12
    d["peak_host_GB"] = (r.get("peak_host_bytes") or 0) / 1e9
    d["step_median_ms"] = (r.get("step_ms") or {}).get("median")
    d["noise_pct"] = 100 * noise(r)
    d["host_mem_gb"] = (r.get("config") or {}).get("host_mem_gb")
    d["depths_measured"], d["fit_bar"] = fit_words(r)
    return d


def fit_words(r):
    """An extrapolated row's measured depths (step, H2D, host AdamW at each) and how its error
    bar was formed, in words for the claim templates; ("-", "-") for other rows."""
    f = r.get("fit") or {}
    if r.get("mode") != "extrapolated" or not f:
        return "-", "-"
    gb = lambda v, u: "-" if v is None else f"{v:.1f}{u}"  # noqa: E731
    ms = lambda v: "-" if v is None else f"{v:.0f} ms"  # noqa: E731
    prof = resultslib.hardware_profile(resultslib.profile_of_gpu((r.get("env") or {}).get("gpu_name")) or "") or {}
    pinned = field(prof, "link.h2d_gbps.pinned")
    of = lambda v: f" = {100 * v / pinned:.0f}% of {pinned:.1f} pinned" if v and pinned else ""  # noqa: E731
    runs = ", ".join(f"L{m['depth']} {m['step_ms']:.0f} ms (H2D {gb(m.get('h2d_gbps'), ' GB/s')}{of(m.get('h2d_gbps'))}, "
                     f"host AdamW {ms(m.get('optimizer_ms'))})" for m in f.get("measured") or [])
    E = 100 * ((r.get("step_ms") or {}).get("err_frac") or 0)
    h, failed = f.get("holdout"), f.get("holdout_failed")
    if h:
        bar = f"±{E:.0f}% (held-out L{h['depth']}: {100 * h.get('err_frac', 0):+.1f}%, x{h.get('lever', 0):.0f} to full depth)"
    elif failed:
        bar = f"±{E:.0f}%, the fit's timing noise alone (held-out L{failed['depth']} failed: {failed['error'][:80]})"
    else:
        bar = f"±{E:.0f}%, the fit's timing noise alone (no depth held out: curvature in depth untested)"
    return runs or "(no per-depth figures)", bar


def beside(spec, ctx):
    """The projection a claim stands beside (`projection`: another experiment's row, e.g. the
    sim's full model on the paper's host): (its words, the row), or (None, None)."""
    b = spec.get("projection")
    if not b:
        return None, None
    rs = [r for r in ctx["all"].get(b["experiment"], []) if ok(r) and matches(r, b.get("where"))]
    if not rs:
        return f"projection ({b['experiment']}): no rows", None
    r = rs[0]
    words = fmt(b.get("ours", "{tflops:.0f} TFLOPS"), enrich(r))
    bd = band(r, ctx)
    return f"{how(r)}: {words}" + (f" ({bd})" if bd else ""), r


def how(r):
    if r is None:
        return "-"
    if r["mode"] == "projected":
        src = "sim" if r.get("backend") == "sim" else "plan"
        return f"projected ({src}, {r.get('hardware')})"
    dev = (r.get("env") or {}).get("gpu_name") if r.get("backend") == "cuda" else None
    dev = dev or r.get("backend")
    if r["mode"] == "extrapolated":
        f = r.get("fit") or {}
        h = (f.get("holdout") or {}).get("depth")
        held = f"held out {h}" if h is not None else "no depth held out: the bar is the fit's noise alone"
        if f.get("holdout_failed"):
            held = f"held-out depth {f['holdout_failed']['depth']} failed: the bar is the fit's noise alone"
        return f"extrapolated ({dev}; fit {','.join(str(d) for d in f.get('depths', []))}, {held})"
    return f"{r['mode']} ({dev})"


def inside_region(r, p):
    """A projection inside a profile's measured region: a model the validating configurations
    measured, its batch and sequence length between theirs (their keys: sim_check.label)."""
    pts = [re.match(r"^(\S+) \S+ b(\d+) T(\d+)", c["key"]) for c in p["configs"] if c["validates_current_engine"]]
    pts = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in pts if m]
    same = [(b, t) for model, b, t in pts if model == r.get("model")]
    return bool(same) and min(b for b, _ in same) <= (r.get("batch") or 0) <= max(b for b, _ in same) and \
        min(t for _, t in same) <= (r.get("seq_len") or 0) <= max(t for _, t in same)


def band(r, ctx):
    """The error band a projection carries (results/sim_validation.json, harness/sweep/sim_check.py):
    inside the measured region of a profile with configurations measured on the current engine
    (inside_region), the worst of them; anywhere else unvalidated, at least the worst validated
    error (the file's `growth` rule); the planner's closed form has none of its own. None when
    nothing has been validated."""
    if "validation" not in ctx:
        path = os.path.join(ctx.get("results_dir") or "", "sim_validation.json")
        ctx["validation"] = common.load_json(path) if ctx.get("results_dir") and os.path.exists(path) else None
    v = ctx["validation"]
    val = [(name, p) for name, p in sorted((v or {}).get("profiles", {}).items()) if p.get("n")]
    if not val or r is None or r.get("mode") != "projected":
        return None
    if r.get("backend") != "sim":
        return "closed form: no measured band for its times"
    p = dict(val).get(r.get("hardware"))
    if p and inside_region(r, p):
        return f"±{100 * p['worst_abs_err']:.0f}%, worst of {p['n']} measured configurations on the {p['gpu']}"
    name, p = max(val, key=lambda t: t[1]["worst_abs_err"])
    return f"unvalidated here: at least ±{100 * p['worst_abs_err']:.0f}%, the worst measured on the {p['gpu']}"


def fmt(template, ctx):
    try:
        return template.format_map(ctx)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        return f"(template error: {e})"


# ---------------------------------------------------------------- outcome and verdict
def outcome_at_least(v, threshold, allowance):
    """v >= threshold, with a relative allowance on v."""
    if v * (1 - allowance) >= threshold:
        return "agrees"
    if v * (1 + allowance) < threshold:
        return "disagrees"
    return "within"


def reduced_depth(rows):
    """"8 of 48 layers" where a row ran a depth-cut model (its verdict is not a full-depth one), else ""."""
    cut = sorted({(r["layers_run"], r["layers_model"]) for r in rows
                  if isinstance(r.get("layers_run"), int) and isinstance(r.get("layers_model"), int)
                  and r["layers_run"] < r["layers_model"]})
    return ", ".join(f"{a} of {b} layers" for a, b in cut)


def failed_rows(spec, rows):
    """Rows with an error that a claim would have read: a failed configuration shows where
    its figure would have been, instead of the claim quietly having no data."""
    sel = [spec[k] for k in ("numerator", "denominator", "where", "a", "b") if isinstance(spec.get(k), dict)]
    return [r for r in rows if "error" in r and (not sel or any(matches(r, w) for w in sel))]


def verdict(outcome, rows, spec, allowance):
    """The verdict words: the outcome, said for the kind of evidence it rests on."""
    modes = {r["mode"] for r in rows}
    # allowance None: a yes/no outcome (fits or not) with no timing noise to allow for; a
    # projection is deterministic: no "noise ±0.0%"
    pct = "" if allowance is None or (allowance < 5e-4 and "projected" in modes) else f"noise ±{100 * allowance:.1f}%"
    words = {"agrees": "agrees", "disagrees": "disagrees", "within": "within noise"}[outcome]
    if "projected" in modes:
        if spec.get("by_construction"):
            return f"by construction ({spec['by_construction']})"
        return f"pending GPU (projection {words}{'; ' + pct if pct else ''})"
    if "extrapolated" in modes:
        words = {"agrees": "agrees", "disagrees": "disagrees", "within": "within error"}[outcome]
        return f"extrapolated (±{100 * (allowance or 0):.0f}%): {words}"
    if all(r.get("backend") == "cuda" for r in rows):
        v = {"agrees": "reproduced", "disagrees": "not reproduced", "within": "inconclusive (within noise)"}[outcome]
        cut = reduced_depth(rows)
        return v + (f" at reduced depth ({cut})" if cut else "") + (f" ({pct})" if pct else "")
    return f"CPU check (not the claim): {words}" + (f" ({pct})" if pct else "")


# ---------------------------------------------------------------- tests
def best(rows, metric="tokens_per_s"):
    return max(rows, key=lambda r: r[metric]) if rows else None


def t_fits(spec, rows, ctx):
    rs = [r for r in rows if matches(r, spec.get("where"))]
    if not rs:
        return None
    fit = [r for r in rs if r.get("fits") and ok(r)]
    if fit:
        b = best(fit)
        return (fmt(spec.get("ours", "{model} fits; best {tokens_per_s:.0f} tokens/s at batch {batch}"), enrich(b)),
                [b], "agrees", None)
    r = rs[0]
    return (f"does not fit: {(r.get('note') or '').replace('does not fit (megatrain plan): ', '')}", [r],
            "disagrees", None)


def t_ratio(spec, rows, ctx):
    metric = spec.get("metric", "tokens_per_s")
    num = [r for r in rows if ok(r) and matches(r, spec["numerator"])]
    den = [r for r in rows if ok(r) and matches(r, spec["denominator"])]
    if not num or not den:
        return None
    m, z = best(num, metric), best(den, metric)
    ratio = m[metric] / z[metric]
    allowance = noise(m) + noise(z)
    c = {"ratio": ratio, "num": enrich(m), "den": enrich(z), "same_batch": ""}
    same = [r for r in den if r.get("batch") == m.get("batch")]
    if same:  # against the denominator's fastest configuration at that batch (a peer's grid)
        c["same_batch"] = f"; at batch {m['batch']}: {m[metric] / best(same, metric)[metric]:.2f}x"
    out = outcome_at_least(ratio, spec["at_least"], allowance)
    return fmt(spec.get("ours", "{ratio:.2f}x best/best{same_batch}"), c), [m, z], out, allowance


EXACT_FIELDS = ("seq_len", "batch", "params", "layers_run", "tokens")


def t_at_least(spec, rows, ctx):
    """The first matching row's `field` >= `at_least`; with `of_profile` (a dotted path in
    the hardware profile of the GPU the row ran on), >= at_least x that figure, and a
    verdict only where the profile says the figure was measured."""
    f = spec["field"]
    rs = [r for r in rows if ok(r) and matches(r, spec.get("where")) and r.get(f) is not None]
    if not rs:
        return None
    # "pick": "max" tests the best row (the longest sequence trained), else the first.
    r = max(rs, key=lambda x: x[f]) if spec.get("pick") == "max" else rs[0]
    # A figure of the configuration (seq_len, batch, params) is exact: no timing noise allowed for.
    allowance = 0.0 if f in EXACT_FIELDS else noise(r, "busy" if f == "gpu_busy_frac" else "step")
    c = enrich(r)
    c["threshold"] = threshold = spec["at_least"]
    measured = True
    if spec.get("of_profile"):
        name = resultslib.profile_of_gpu((r.get("env") or {}).get("gpu_name"))
        prof = resultslib.hardware_profile(name) or {}
        v = field(prof, spec["of_profile"])
        if not isinstance(v, (int, float)) or v <= 0:
            return (f"no {spec['of_profile']} in a profile of {(r.get('env') or {}).get('gpu_name')}", [r], None,
                    allowance)
        src = str((prof.get("sources") or {}).get(spec["of_profile"], ""))
        measured = src.startswith("measured")
        c.update(profile=name + ("" if measured else ": datasheet, not measured"), profile_value=v,
                 of_profile_pct=100 * r[f] / v)
        c["threshold"] = threshold = spec["at_least"] * v
    text = fmt(spec.get("ours", "{" + f + ":.2f}"), c)
    con = [x for x in rows if ok(x) and spec.get("contrast") and matches(x, spec["contrast"])]
    if con and spec.get("ours_contrast"):
        text += fmt(spec["ours_contrast"], enrich(con[0]))
    return text, [r], outcome_at_least(r[f], threshold, allowance) if measured else None, allowance


def t_not_slower(spec, rows, ctx):
    """Rows `a` not slower than rows `b` (step time): a / b <= 1, with noise."""
    a = [r for r in rows if ok(r) and matches(r, spec["a"])]
    b = [r for r in rows if ok(r) and matches(r, spec["b"])]
    if not a or not b:
        return None
    ra, rb = a[0], b[0]
    q = ra["step_ms"]["median"] / rb["step_ms"]["median"]
    allowance = noise(ra) + noise(rb)
    out = "agrees" if q * (1 + allowance) <= 1 else "disagrees" if q * (1 - allowance) > 1 else "within"
    c = {"a": enrich(ra), "b": enrich(rb), "gain_pct": 100 * (1 / q - 1)}
    return fmt(spec.get("ours", "{gain_pct:+.1f}%"), c), [ra, rb], out, allowance


def t_largest_fit(spec, rows, ctx):
    rs = [r for r in rows if "error" not in r and matches(r, spec.get("where"))]
    if not rs:
        return None
    groups = {}
    for r in rs:
        g = field(r, spec["group_by"]) if spec.get("group_by") else ""
        groups.setdefault(g, [])
        if r.get("fits") and (r.get("step_ms") or r["mode"] == "projected"):
            groups[g].append(r)
    parts, used = [], []
    for g, fit in groups.items():
        b = max(fit, key=lambda r: r["params"]) if fit else None
        if b:
            used.append(b)
        parts.append(fmt(spec.get("ours", "{group} {model} ({params_B:.1f}B)"), dict(enrich(b), group=g))
                     if b else f"{g} none".strip())
    text = ", ".join(parts)
    exp = spec.get("expect")
    if not exp:
        return text, used or rs[:1], None, None
    got = [r for r in used if not spec.get("group_by") or field(r, spec["group_by"]) == exp.get("group")]
    good = bool(got) and all(got[0].get(k) == v for k, v in exp.items() if k != "group")
    return text, used or rs[:1], "agrees" if good else "disagrees", None


def t_extrapolation(spec, rows, ctx):
    """The extrapolated rows against the full depth measured: the row's own check (fit.check,
    measured in the same interleaved rounds as the fit, so under the same load) where it has
    one, else the measured row of the same configuration in another experiment (`against`).
    Does the measured error fall inside the row's own error bar (plus the measurement's noise)?"""
    against = [r for r in ctx["all"].get(spec["against"], []) if ok(r) and r["mode"] == "measured"]
    pairs = []
    for r in rows:
        if not ok(r) or r["mode"] != "extrapolated":
            continue
        chk = (r.get("fit") or {}).get("check")
        if chk and chk.get("depth") == r.get("layers_model") and chk.get("measured_ms"):
            m = {"step_ms": {"median": chk["measured_ms"], "min": chk["measured_min_ms"],
                             "max": chk["measured_max_ms"]}}
            pairs.append((r, m, "same rounds"))
            continue
        for m in against:
            if all(r.get(k) == m.get(k) for k in spec.get("match", ["system", "batch"])):
                pairs.append((r, m, spec["against"]))
                break
    if not pairs:
        return None
    # A bar wider than max_bar (the machine's load widens it) cannot fail: no evidence either way.
    parts, inside, wide, max_bar = [], True, False, float(spec.get("max_bar", 0.25))
    for r, m, where in pairs:
        err = r["step_ms"]["median"] / m["step_ms"]["median"] - 1
        E = r["step_ms"].get("err_frac", 0.0)
        nm = noise(m)
        inside &= abs(err) <= E + nm
        wide |= E + nm > max_bar
        parts.append(f"{r['system']} {100 * err:+.0f}% (bar ±{100 * E:.0f}%)")
    whence = sorted({w for _, _, w in pairs})
    text = ("extrapolated vs measured step time (" + " and ".join(
        "full depth measured in the same interleaved rounds" if w == "same rounds" else f"measured in {w}"
        for w in whence) + "): " + ", ".join(parts))
    outcome = "disagrees" if not inside else "within" if wide else "agrees"
    return text, [pairs[0][0]], outcome, 0.0


def t_predicted(spec, rows, ctx):
    """Each projected row of this sweep against the measured row of the same configuration
    (experiments `against`, measured on the GPU whose profile the projection used):
    |projected / measured - 1| <= `within`, allowing for the measured row's noise; stated
    per configuration. Agrees when every pair is clearly inside, disagrees when one is
    clearly outside."""
    match = spec.get("match", ["model", "system", "batch", "seq_len", "precision", "variant", "layers_run"])
    meas = [m for e in spec["against"] for m in ctx["all"].get(e, []) if ok(m) and m["mode"] == "measured"]
    parts, used, outs = [], [], []
    for r in rows:
        if not ok(r) or r["mode"] != "projected" or not matches(r, spec.get("where")):
            continue
        for m in meas:
            if any(r.get(k) != m.get(k) for k in match) or not resultslib.same_gpu(r, m):
                continue
            err = r["step_ms"]["median"] / m["step_ms"]["median"] - 1
            nm = noise(m)
            outs.append("agrees" if abs(err) + nm <= spec["within"] else
                        "disagrees" if abs(err) - nm > spec["within"] else "within")
            parts.append(f"{m['model']} {m['system']} b{m['batch']} T{m['seq_len']}"
                         + (f" L{m['layers_run']}" if m.get("layers_run") != m.get("layers_model") else "")
                         + (f" {m['variant']}" if m.get("variant") else "") + f" {100 * err:+.0f}%")
            used.append(m)
            break
    if not parts:
        return None
    out = "disagrees" if "disagrees" in outs else "agrees" if all(o == "agrees" for o in outs) else "within"
    text = fmt(spec.get("ours", "sim vs measured step time: {pairs}"), {"pairs": ", ".join(parts), "n": len(parts)})
    return text, used, out, max(noise(m) for m in used)


def t_validation(spec, rows, ctx):
    """The sim against every measured configuration, as harness/sweep/sim_check.py wrote it
    (results/sim_validation.json; harness_test_sim_check holds it to a re-run of the sim).
    Only the configurations whose engine commit has every change the sim models count:
    |sim / measured - 1| <= `within`, allowing for the measured row's noise; the others are
    listed apart, with their errors, as measured on an older engine."""
    path = os.path.join(ctx["results_dir"], "sim_validation.json")
    if not os.path.exists(path):
        return None
    v = common.load_json(path)
    meas = {label(m): m for e in spec["against"] for m in ctx["all"].get(e, []) if ok(m) and m["mode"] == "measured"}
    texts, used, outs = [], [], []
    for name, p in sorted(v["profiles"].items()):
        good = [c for c in p["configs"] if c["validates_current_engine"]]
        old = [c for c in p["configs"] if not c["validates_current_engine"]]
        for c in good:
            m = meas.get(c["key"])
            nm = noise(m) if m else 0.0
            if m:
                used.append(m)
            outs.append("agrees" if abs(c["err"]) + nm <= spec["within"] else
                        "disagrees" if abs(c["err"]) - nm > spec["within"] else "within")
        t = f"{name} ({p['gpu']}), the {p['n']} configurations measured on the current engine: " + (", ".join(
            f"{c['key']} {100 * c['err']:+.0f}%" for c in good) or "none")
        if good:
            t += f" (worst ±{100 * p['worst_abs_err']:.1f}%, median ±{100 * p['median_abs_err']:.1f}%)"
        if old:
            t += f"; not counted, {len(old)} measured on an engine whose host side changed since: " + ", ".join(
                f"{c['key']} {100 * c['err']:+.0f}%" for c in old)
        texts.append(t)
    if not outs:
        return "; ".join(texts), used, None, 0.0
    out = "disagrees" if "disagrees" in outs else "agrees" if all(o == "agrees" for o in outs) else "within"
    return "; ".join(texts), used, out, max((noise(m) for m in used), default=0.0)


def t_ratios(spec, rows, ctx):
    """Ratios of one system to the others at each value of `over` (no claim attached)."""
    rs = [r for r in rows if ok(r) and matches(r, spec.get("where"))]
    if not rs:
        return None
    over, sysf, base = spec.get("over", "batch"), spec.get("by", "system"), spec["base"]
    parts = []
    for x in sorted({r[over] for r in rs}):
        t = {r[sysf]: r for r in rs if r[over] == x}
        if base not in t:
            continue
        q = [f"/{k} {t[base]['tokens_per_s'] / v['tokens_per_s']:.2f}x (±{100 * (noise(t[base]) + noise(v)):.0f}%)"
             for k, v in sorted(t.items()) if k != base]
        parts.append(f"{over} {x}: {base} " + ", ".join(q))
    return "; ".join(parts) + f" ({rs[0]['model']})", rs[:1], None, 0.0


def t_value(spec, rows, ctx):
    rs = [r for r in rows if ok(r) and matches(r, spec.get("where"))]
    if not rs:
        return None
    r = rs[0]
    return fmt(spec.get("ours", "{tflops:.0f} TFLOPS"), enrich(r)), [r], None, noise(r)


def t_published(spec, rows, ctx):
    """A published figure beside our model of that system (and, optionally, another row):
    how far the model lands from it. A check of the model, so no verdict: nothing is fitted."""
    metric = spec.get("metric", "tflops")
    model = [r for r in rows if ok(r) and matches(r, spec["model"])]
    if not model:
        return None
    m = model[0]
    c = dict(enrich(m), model_value=m[metric], published=spec["published"],
             err_pct=100 * (m[metric] / spec["published"] - 1), beside_value=float("nan"), beside_ratio=float("nan"))
    used = [m]
    beside = [r for r in rows if ok(r) and spec.get("beside") and matches(r, spec["beside"])]
    if beside:
        c["beside_value"] = beside[0][metric]
        c["beside_ratio"] = beside[0][metric] / m[metric]
        used.append(beside[0])
    return fmt(spec["ours"], c), used, None, noise(m)


# The resources a step can be bound by, as the engine reports their busy time per step.
BOUND_TERMS = (("compute_ms", "compute"), ("h2d_ms", "H2D"), ("optimizer_ms", "host AdamW"))


def t_bound(spec, rows, ctx):
    """Each row's step against the longest busy time of the resources it needs (compute,
    the H2D link, the host AdamW: the engine's own per-step figures): step / max <= `within`
    at every row, allowing for the row's noise. Agrees when every row is clearly inside,
    disagrees when one is clearly outside."""
    rs = [r for r in rows if ok(r) and matches(r, spec.get("where"))
          and all(isinstance(r.get(k), (int, float)) for k, _ in BOUND_TERMS)]
    if not rs:
        return None
    parts, outs, worst = [], [], None
    for r in sorted(rs, key=lambda x: (x["model"], x.get("layers_run") or 0, x["batch"])):
        k, name = max(BOUND_TERMS, key=lambda t: r[t[0]])
        q = r["step_ms"]["median"] / r[k] if r[k] > 0 else float("inf")
        nm = noise(r)
        outs.append("agrees" if q * (1 + nm) <= spec["within"] else
                    "disagrees" if q * (1 - nm) > spec["within"] else "within")
        worst = q if worst is None or q > worst else worst
        cut = f" L{r['layers_run']}" if r.get("layers_run") != r.get("layers_model") else ""
        parts.append(f"{r['model']}{cut} b{r['batch']} {q:.2f} ({name})")
    out = "disagrees" if "disagrees" in outs else "agrees" if all(o == "agrees" for o in outs) else "within"
    text = fmt(spec.get("ours", "step / max(compute, H2D, host AdamW): {pairs}; worst {worst:.2f}"),
               {"pairs": ", ".join(parts), "worst": worst, "n": len(parts)})
    return text, rs, out, max(noise(r) for r in rs)


RUN = {"fits": t_fits, "ratio": t_ratio, "at_least": t_at_least, "not_slower": t_not_slower,
       "largest_fit": t_largest_fit, "extrapolation": t_extrapolation, "predicted": t_predicted, "ratios": t_ratios,
       "value": t_value,
       "published": t_published, "validation": t_validation, "bound": t_bound}


class Row(tuple):
    """A table row (claim, paper, ours, how obtained, source, verdict) and its tally kind."""

    def __new__(cls, cells, kind):
        r = super().__new__(cls, cells)
        r.kind = kind
        return r


KINDS = (("here", "reproduced here"), ("filed", "reproduced on a filed GPU row"), ("projected", "projected"),
         ("failed", "failed"), ("pending", "pending (no data)"), ("other", "other"))


def kind(outcome, used, where):
    """The tally's word for a row: a GPU measurement that agrees is reproduced (here when this
    run made every row), one that disagrees failed; a projection is projected whatever it says."""
    modes = {r.get("mode") for r in used}
    if "projected" in modes:
        return "projected"
    gpu = bool(used) and all(r.get("backend") == "cuda" for r in used)
    if outcome == "disagrees" and (gpu or "extrapolated" in modes):
        return "failed"
    if outcome == "agrees" and gpu:
        return "here" if where == "this run" else "filed"
    return "other"


def campaigns(results_dir):
    """The GPU campaign parts filed beside the results (results/campaign/*-manifest.json)."""
    out = []
    for p in sorted(glob.glob(os.path.join(results_dir or "", "campaign", "*-manifest.json"))):
        try:
            with open(p) as f:
                m = json.load(f)
            out.append((m["tag"], m["git_sha"], m.get("gpu_name"), utc_s(m["utc"]), float(m.get("seconds") or 0)))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a manifest that cannot be read names no campaign; the row still says its date
    return out


def utc_s(t):
    return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def provenance(rows, ctx):
    """'this run', or 'filed from <campaign part or machine>, <date>, <commit>' of the newest
    filed row (a manifest's utc is its end: a row of the part started within its seconds)."""
    if not rows:
        return "-"
    filed = [r for r in rows if not r.get("_this_run")]
    if not filed:
        return "this run"
    env = max(filed, key=lambda r: (r.get("env") or {}).get("utc") or "").get("env") or {}
    sha, t = (env.get("git_sha") or "?")[:12], env.get("utc") or ""
    where = env.get("gpu_name") or env.get("cpu_model") or "another machine"
    if t and env.get("gpu_name"):
        ts = utc_s(t)
        if "campaigns" not in ctx:
            ctx["campaigns"] = campaigns(ctx.get("results_dir"))
        for tag, msha, gpu, end, secs in ctx["campaigns"]:
            if sha.startswith(msha[:12]) and gpu == env["gpu_name"] and end - secs - 120 <= ts <= end + 120:
                where = f"campaign part {tag}"
                break
    s = f"filed from {where}, {t[:10] or 'undated'}, {sha}"
    return s if len(filed) == len(rows) else "this run + " + s


def tally(out):
    n = {k: sum(1 for r in out if getattr(r, "kind", None) == k) for k, _ in KINDS}
    return "tally: " + ", ".join(f"{words} {n[k]}" for k, words in KINDS)


def claim_row(spec, rows, ctx):
    res = RUN[spec["test"]](spec, rows, ctx)
    proj, _ = beside(spec, ctx)
    if res is None and proj and not failed_rows(spec, rows):  # nothing measured yet: the projection waits
        return Row((spec["claim"], spec.get("paper", "-"), f"no GPU rows yet; beside: {proj}",
                    "-", "-", f"pending GPU ({spec.get('pending', 'not yet run')})"), "pending")
    if res is not None and proj:
        res = (f"{res[0]}; beside: {proj}",) + tuple(res[1:])
    if res is None:
        failed = failed_rows(spec, rows)
        if failed:
            r = failed[0]
            err = " ".join(str(r["error"]).split())
            what = f"{r.get('system')} b{r.get('batch')}" + (f" {r['precision']}" if r.get("precision") else "")
            return Row((spec["claim"], spec.get("paper", "-"),
                        f"no figure: {what} failed: {err[:160]}{'...' if len(err) > 160 else ''}",
                        (r.get("env") or {}).get("gpu_name") or r.get("backend") or "-", provenance(failed, ctx),
                        f"failed ({len(failed)} row(s) with an error in results/{r.get('experiment')}.jsonl)"),
                       "failed")
        if spec.get("optional"):
            return None
        return Row((spec["claim"], spec.get("paper", "-"), "no rows", "-", "-", "no data"), "pending")
    text, used, outcome, allowance = res
    src = spec.get("how") or how(used[0] if used else None)
    b = None if spec.get("how") else band(used[0] if used else None, ctx)
    if b and src.endswith(")"):
        src = f"{src[:-1]}; {b})"
    if outcome is None:
        v = f"no verdict ({spec.get('no_verdict', 'no claim to test')})"
    elif spec.get("words"):  # a test that is not a paper claim says its outcome in its own words
        exact = (allowance or 0) < 5e-4 and all(r.get("mode") == "projected" for r in used)
        v = spec["words"].get(outcome, "inconclusive (noise {noise})").format(
            noise="deterministic" if exact else f"±{100 * (allowance or 0):.1f}%")
    else:
        v = verdict(outcome, used, spec, allowance)
    where = provenance(used, ctx)
    return Row((spec["claim"], spec.get("paper", "-"), text, src, where, v), kind(outcome, used, where))


def check_spec(spec, where):
    for k in ("id", "claim", "test"):
        if k not in spec:
            die(f"{where}: a claim row needs '{k}'")
    if spec["test"] not in TESTS:
        die(f"{where}: claim {spec['id']}: test '{spec['test']}' is not one of {', '.join(TESTS)}")
    need = {"ratio": ("numerator", "denominator", "at_least"), "at_least": ("field", "at_least"),
            "not_slower": ("a", "b"), "extrapolation": ("against",), "predicted": ("against", "within"),
            "ratios": ("base",),
            "published": ("published", "model", "ours"), "validation": ("against", "within"), "bound": ("within",)}
    for k in need.get(spec["test"], ()):
        if k not in spec:
            die(f"{where}: claim {spec['id']}: test {spec['test']} needs '{k}'")


def table(rows, sweep_list=None, results_dir=None):
    """[(claim, paper, ours, how obtained, verdict)] in claim-id order."""
    by = {}
    for r in rows:
        by.setdefault(r.get("experiment"), []).append(r)
    specs = []
    for s in sweep_list if sweep_list is not None else sweeps.all_sweeps():
        for spec in s.get("claims", []):
            check_spec(spec, s["_path"])
            specs.append((spec["id"], s["experiment"], spec))
    out = []
    ctx = {"all": by, "results_dir": results_dir or os.path.join(REPO, "results")}
    for _, exp, spec in sorted(specs, key=lambda t: t[0]):
        row = claim_row(spec, by.get(exp, []), ctx)
        if row:
            out.append(row)
    return out


def render(out, markdown=False, brief=False):
    head = ("claim", "paper", "ours", "how obtained", "source", "verdict")
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in out]
        return "\n".join(lines) + "\n\n" + tally(out) + "\n"
    if brief:  # a terminal's width: the claim, where its figures come from, the verdict
        cut = lambda x, n: x if len(x) <= n else x[:n - 3] + "..."  # noqa: E731
        src = lambda x: re.sub(r"\b([0-9a-f]{8})[0-9a-f]{4}$", r"\1",  # noqa: E731
                               x.replace("filed from ", "").replace("campaign part ", "part "))
        lines = [f"{'claim':<36}  {'source (filed from)':<40}  verdict"]
        lines += [f"{cut(r[0], 36):<36}  {cut(src(r[4]), 40):<40}  {cut(r[5], 48)}" for r in out]
        return "\n".join(lines + [tally(out)]) + "\n"
    w = [max(len(str(r[i])) for r in list(out) + [head]) for i in range(len(head))]
    w[2] = min(w[2], 200)
    lines = ["  ".join(str(h).ljust(w[i]) for i, h in enumerate(head)), "  ".join("-" * x for x in w)]
    for row in out:
        lines.append("  ".join(str(c).ljust(w[i]) for i, c in enumerate(row)))
    return "\n".join(lines + [tally(out)]) + "\n"


def markdown_file(out):
    return ("# Claims table (generated by harness/sweep/claims.py from results/*.jsonl)\n\n"
            "Verdicts and their noise allowances: harness/sweep/claims.py; tolerances: REPRODUCE.md.\n\n"
            + render(out, markdown=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(REPO, "results"))
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    ap.add_argument("--run", help="a run's own results directory: its rows say 'this run' and replace results/' "
                                  "rows of the same configuration")
    ap.add_argument("--since", help="rows whose env.utc is at or after this UTC time (YYYY-MM-DDTHH:MM:SSZ) say "
                                    "'this run' (reproduce.sh passes its start)")
    ap.add_argument("--brief", action="store_true", help="a short table for a terminal")
    ap.add_argument("--allow-dirty", action="store_true", help="admit rows made from a dirty or unknown tree")
    ap.add_argument("--sweeps", help="directory of the sweep files (default experiments/sweeps)")
    args = ap.parse_args()
    inputs = (glob.glob(os.path.join(args.results, "*.json*")) +
              glob.glob(os.path.join(args.sweeps or sweeps.SWEEP_DIR, "*.json")))
    if args.markdown:  # refused before anything is read: never written over what it reads
        common.not_own_input(args.markdown, inputs, "--markdown")
    rows = trust.trusted_results(args.results, args.allow_dirty, "claims", args.sweeps)
    results_dir = args.results
    if args.run:
        if not os.path.isdir(args.run):
            die(f"--run {args.run}: not a directory")
        mine = [dict(r, _this_run=True) for r in trust.trusted_results(args.run, args.allow_dirty, "claims")]
        keys = {(r.get("experiment"), r.get("config_key")) for r in mine}
        rows = [r for r in rows if (r.get("experiment"), r.get("config_key")) not in keys] + mine
        if os.path.exists(os.path.join(args.run, "sim_validation.json")):
            results_dir = args.run  # the run's own sim check gives the projections' bands
    if args.since:
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", args.since):
            die(f"--since {args.since}: want YYYY-MM-DDTHH:MM:SSZ")
        rows = [dict(r, _this_run=True) if ((r.get("env") or {}).get("utc") or "") >= args.since else r for r in rows]
    out = table(rows, results_dir=results_dir)
    sys.stdout.write(render(out, brief=args.brief))
    if args.markdown:
        common.write_text(args.markdown, markdown_file(out), inputs, "--markdown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
