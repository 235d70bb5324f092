"""extrapolate.py: a sweep's extrapolated rows (harness/sweep/run.py, mode extrapolated):
`megatrain train` at truncated depths of the real width, in interleaved rounds, and the
step time fitted linear in depth with the error of a held-out depth.
"""
import common  # noqa: F401  (puts harness/ on sys.path: resultslib)
from megatrain_cli import RunError
from resultslib import median, spread, steady_steps


def linfit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def measure_depths(R, c, depths):
    """Runs every depth `rounds` times, interleaved (round r: all depths, in alternating
    order), so that what else runs on a shared machine falls on every depth alike
    instead of on whichever depth happened to run during it: the fit then measures
    depth, not the load. Returns {depth: {stats over all timed steps of all rounds,
    rss}} and, per round, {depth: median of that round's timed steps}."""
    paths = {d: R.model_config(c, d)[0] for d in depths}
    timed = {d: [] for d in depths}
    rss = {d: None for d in depths}
    per_round = []
    for r in range(c.get("rounds") or 1):
        med = {}
        for d in (depths if r % 2 == 0 else depths[::-1]):
            steps = R.train(c, paths[d])
            t = steady_steps([s["step_ms"] for s in steps], c["warmup"])  # the one timing rule's steady state
            timed[d] += t
            med[d] = median(t)
            got = [s["peak_rss_bytes"] for s in steps if isinstance(s.get("peak_rss_bytes"), (int, float))]
            if got:
                rss[d] = max(got + ([rss[d]] if rss[d] is not None else []))
        per_round.append(med)
    runs = {d: {"stats": spread(timed[d], n=True), "rss": rss[d]} for d in depths}
    return runs, per_round


def extrapolate(runs, depths, holdout, L, per_round=None, check=None):
    """Step time fitted linear in depth over `depths` (medians), reported at depth L with
    an error bar from the method's own held-out check: the fit predicts the held-out
    depth h, and its error there grows with the distance from the fitted depths' mean
    x, as the error of a fitted slope does: err(L) = err(h) (L - x) / (h - x). The
    timing noise of the runs (half the min..max spread over the median, the largest
    of them) is added in quadrature, and with >= 2 interleaved rounds so is the spread
    of the rounds' own predictions at L (half their min..max over the prediction): how
    much the machine's load moved the answer. step_ms.min and .max are median -/+ that
    error: a band around the median, never outside it. With `check` (the full depth L,
    measured in the same rounds) the row also says how far the prediction fell from it."""
    med = [runs[d]["stats"]["median"] for d in depths]
    a, b = linfit(depths, med)
    pred_L = a + b * L
    if b <= 0 or pred_L <= 0:  # timing noise larger than a layer's cost: nothing to extrapolate
        raise RunError(f"the fit over depths {depths} ({', '.join(f'{m:.1f}' for m in med)} ms) gives "
                       f"{b:.2f} ms per layer and {pred_L:.1f} ms at {L} layers: no extrapolation")
    h = holdout
    meas_h = runs[h]["stats"]["median"]
    pred_h = a + b * h
    xbar = sum(depths) / len(depths)
    lever = abs((L - xbar) / (h - xbar))
    err_h = (pred_h - meas_h) / meas_h  # signed, relative, at the held-out depth
    err_L = abs(pred_h - meas_h) * lever / pred_L
    noise = max((r["stats"]["max"] - r["stats"]["min"]) / (2 * r["stats"]["median"]) for r in runs.values())
    round_preds = []
    for pr in per_round or []:
        ra, rb = linfit(depths, [pr[d] for d in depths])
        round_preds.append(ra + rb * L)
    spread = (max(round_preds) - min(round_preds)) / (2 * pred_L) if len(round_preds) >= 2 else 0.0
    E = (err_L ** 2 + noise ** 2 + spread ** 2) ** 0.5
    step = {"median": pred_L, "min": max(0.0, pred_L * (1 - E)), "max": pred_L * (1 + E),
            "n": min(runs[d]["stats"]["n"] for d in depths), "err_frac": E}
    fit = {"depths": depths, "step_ms": med, "intercept_ms": a, "per_layer_ms": b,
           "step_ms_min": [runs[d]["stats"]["min"] for d in depths],
           "step_ms_max": [runs[d]["stats"]["max"] for d in depths],
           "holdout": {"depth": h, "measured_ms": meas_h, "predicted_ms": pred_h, "err_frac": err_h,
                       "lever": lever, "measured_min_ms": runs[h]["stats"]["min"],
                       "measured_max_ms": runs[h]["stats"]["max"]},
           "noise_frac": noise, "err_frac": E, "rounds": len(per_round or []) or 1,
           "err_method": "held-out depth: |predicted - measured| x (L - mean fitted depth) / (h - mean fitted depth), "
                         "with the runs' timing noise and the interleaved rounds' spread at L in quadrature"}
    if len(round_preds) >= 2:
        fit["round_predicted_ms"], fit["round_spread_frac"] = round_preds, spread
    if check is not None:
        m = runs[check]["stats"]
        fit["check"] = {"depth": check, "measured_ms": m["median"], "measured_min_ms": m["min"],
                        "measured_max_ms": m["max"], "predicted_ms": a + b * check,
                        "err_frac": (a + b * check) / m["median"] - 1,
                        "how": "measured at full depth in the same interleaved rounds as the fit"}
    return step, fit
