"""extrapolate.py: a sweep's extrapolated rows (harness/sweep/run.py, mode extrapolated):
`megatrain train` at truncated depths of the real width, in interleaved rounds, and the
step time fitted linear in depth with the error of a held-out depth.
"""
from .megatrain_cli import RunError
from ..resultslib import median, spread, steady_steps


def linfit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def measure_depths(R, c, depths, optional=()):
    """Runs every depth `rounds` times, interleaved (round r: all depths, in alternating
    order), so that what else runs on a shared machine falls on every depth alike
    instead of on whichever depth happened to run during it: the fit then measures
    depth, not the load. Returns {depth: {stats over all timed steps of all rounds,
    rss}} and, per round, {depth: median of that round's timed steps}. A depth in
    `optional` (the held-out one) that fails is dropped with its error ({depth: error},
    third value): the fitted depths still make a row, which says what was lost."""
    paths = {d: R.model_config(c, d)[0] for d in depths}
    timed = {d: [] for d in depths}
    steps_at = {d: [] for d in depths}
    rss = {d: None for d in depths}
    per_round, failed = [], {}
    for r in range(c.get("rounds") or 1):
        med = {}
        for d in (depths if r % 2 == 0 else depths[::-1]):
            if d in failed:
                continue
            try:
                steps = R.train(c, paths[d])
            except RunError as e:
                if d not in optional:
                    raise
                failed[d] = " ".join(str(e).split())[:300]
                continue
            t = steady_steps([s["step_ms"] for s in steps], c["warmup"])  # the one timing rule's steady state
            timed[d] += t
            steps_at[d] += steps[c["warmup"]:-1]
            med[d] = median(t)
            got = [s["peak_rss_bytes"] for s in steps if isinstance(s.get("peak_rss_bytes"), (int, float))]
            if got:
                rss[d] = max(got + ([rss[d]] if rss[d] is not None else []))
        per_round.append(med)
    runs = {d: {"stats": spread(timed[d], n=True), "rss": rss[d], "figures": depth_figures(steps_at[d])}
            for d in depths if d not in failed}
    per_round = [{d: m for d, m in pr.items() if d not in failed} for pr in per_round]
    return runs, per_round, failed


# The CLI's per-step figures a depth's run keeps (medians over its timed steps): what the step
# is made of at each measured depth (the link's rate, the host AdamW), beside its step time.
DEPTH_FIGURES = ("h2d_gbps", "h2d_ms", "compute_ms", "optimizer_ms", "gpu_busy_frac")


def depth_figures(timed):
    out = {}
    for k in DEPTH_FIGURES:
        v = [s[k] for s in timed if isinstance(s.get(k), (int, float))]
        out[k] = median(v) if v else None
    gpu = [s["peak_gpu_bytes"] for s in timed if isinstance(s.get("peak_gpu_bytes"), (int, float))]
    out["peak_gpu_bytes"] = max(gpu) if gpu else None
    return out


def noise_at(runs, depths, L, xbar, sxx):
    """Without a held-out depth: the runs' timing noise (half each depth's min..max) carried to
    L through the least-squares weights w_d = 1/n + (L - x)(d - x)/Sxx, in quadrature (ms)."""
    n = len(depths)
    tot = 0.0
    for d in depths:
        st = runs[d]["stats"]
        w = 1 / n + (L - xbar) * (d - xbar) / sxx
        tot += (w * (st["max"] - st["min"]) / 2) ** 2
    return tot ** 0.5


HOLDOUT_METHOD = ("held-out depth: |predicted - measured| x (L - mean fitted depth) / (h - mean fitted depth), "
                  "with the runs' timing noise and the interleaved rounds' spread at L in quadrature")
NO_HOLDOUT_METHOD = ("no held-out depth: the fit's alone, the runs' timing noise (half each depth's min..max) carried "
                     "to L through the fit's weights, with the interleaved rounds' spread at L in quadrature; nothing "
                     "tests that the step is linear in depth, so the bar leaves out any curvature")


def bar_too_wide(step, fit, runs, L):
    """A bar past +-100% (a loaded machine): median (1 - E) is no lower bound. The row keeps E
    and its median; min becomes the fastest timed step at the deepest depth run (a deeper
    model does every layer of it, so is no faster), never above the median; fit says so."""
    d = max(x for x in runs if x <= L)
    step["min"] = min(step["median"], runs[d]["stats"]["min"])
    fit["bar_too_wide"] = (f"the bar +-{100 * step['err_frac']:.0f}% passes +-100%: step_ms.min is the fastest "
                           f"timed step at depth {d} ({runs[d]['stats']['min']:.1f} ms; a deeper model is no "
                           f"faster), not median x (1 - err_frac); HINT: re-run on a quieter machine or with "
                           f"more rounds")


def extrapolate(runs, depths, holdout, L, per_round=None, check=None):
    """Step time fitted linear in depth over `depths` (medians), reported at depth L with
    an error bar from the method's own held-out check: the fit predicts the held-out
    depth h, and its error there grows with the distance from the fitted depths' mean
    x, as the error of a fitted slope does: err(L) = err(h) (L - x) / (h - x). The
    timing noise of the runs (half the min..max spread over the median, the largest
    of them) is added in quadrature, and with >= 2 interleaved rounds so is the spread
    of the rounds' own predictions at L (half their min..max over the prediction): how
    much the machine's load moved the answer. step_ms.min and .max are median -/+ that
    error: a band around the median, never outside it (a bar past +-100%: bar_too_wide).
    With `check` (the full depth L, measured in the same rounds) the row also says how far
    the prediction fell from it.
    `holdout` None (the sweep's "none": two depths are all that fit the time): the bar is
    the fit's own, the timing noise carried to L (noise_at); fit.holdout is null and
    fit.err_method says so. fit.measured: every run depth's step and per-step figures."""
    med = [runs[d]["stats"]["median"] for d in depths]
    a, b = linfit(depths, med)
    pred_L = a + b * L
    if b <= 0 or pred_L <= 0:  # timing noise larger than a layer's cost: nothing to extrapolate
        raise RunError(f"the fit over depths {depths} ({', '.join(f'{m:.1f}' for m in med)} ms) gives "
                       f"{b:.2f} ms per layer and {pred_L:.1f} ms at {L} layers: no extrapolation")
    xbar = sum(depths) / len(depths)
    noise = max((r["stats"]["max"] - r["stats"]["min"]) / (2 * r["stats"]["median"]) for r in runs.values())
    if holdout is None:
        # no held-out depth: nothing tests that the step is linear in depth; the bar is the
        # timing noise the fit carries to L (it grows with the lever, unlike `noise`)
        err_L = noise_at(runs, depths, L, xbar, sum((d - xbar) ** 2 for d in depths)) / pred_L
        hold, noise_in = None, 0.0  # the noise is inside err_L already
    else:
        h = holdout
        meas_h = runs[h]["stats"]["median"]
        pred_h = a + b * h
        lever = abs((L - xbar) / (h - xbar))
        err_h = (pred_h - meas_h) / meas_h  # signed, relative, at the held-out depth
        err_L = abs(pred_h - meas_h) * lever / pred_L
        hold = {"depth": h, "measured_ms": meas_h, "predicted_ms": pred_h, "err_frac": err_h,
                "lever": lever, "measured_min_ms": runs[h]["stats"]["min"],
                "measured_max_ms": runs[h]["stats"]["max"]}
        noise_in = noise
    round_preds = []
    for pr in per_round or []:
        ra, rb = linfit(depths, [pr[d] for d in depths])
        round_preds.append(ra + rb * L)
    spread = (max(round_preds) - min(round_preds)) / (2 * pred_L) if len(round_preds) >= 2 else 0.0
    E = (err_L ** 2 + noise_in ** 2 + spread ** 2) ** 0.5
    step = {"median": pred_L, "min": pred_L * (1 - E), "max": pred_L * (1 + E),
            "n": min(runs[d]["stats"]["n"] for d in depths), "err_frac": E}
    fit = {"depths": depths, "step_ms": med, "intercept_ms": a, "per_layer_ms": b,
           "step_ms_min": [runs[d]["stats"]["min"] for d in depths],
           "step_ms_max": [runs[d]["stats"]["max"] for d in depths],
           "holdout": hold, "noise_frac": noise, "err_frac": E, "rounds": len(per_round or []) or 1,
           "measured": [dict(depth=d, step_ms=runs[d]["stats"]["median"], step_ms_min=runs[d]["stats"]["min"],
                             step_ms_max=runs[d]["stats"]["max"], n=runs[d]["stats"]["n"], **runs[d].get("figures", {}))
                        for d in sorted(runs)],
           "err_method": HOLDOUT_METHOD if hold else NO_HOLDOUT_METHOD}
    if len(round_preds) >= 2:
        fit["round_predicted_ms"], fit["round_spread_frac"] = round_preds, spread
    if step["min"] <= 0:
        bar_too_wide(step, fit, runs, L)
    if check is not None:
        m = runs[check]["stats"]
        fit["check"] = {"depth": check, "measured_ms": m["median"], "measured_min_ms": m["min"],
                        "measured_max_ms": m["max"], "predicted_ms": a + b * check,
                        "err_frac": (a + b * check) / m["median"] - 1,
                        "how": "measured at full depth in the same interleaved rounds as the fit"}
    return step, fit
