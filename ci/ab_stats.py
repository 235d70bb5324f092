#!/usr/bin/env python3
"""ab_stats.py: the verdicts of ci/ab.sh from its per-round rows.

    python3 -m ci.ab_stats [--threshold PCT] [--seed N] [--suspects FILE] ROWS.jsonl

ROWS: one JSON object a line, {"round": R, "side": "a"|"b", "bench": NAME, "ms": T} (a: REV_A).
Per benchmark the rounds are paired (A and B of one round ran back to back): the ratio
is the median over rounds of B/A, its interval the 2.5th..97.5th percentile of that
median over bootstrap resamples of the rounds (seeded: the same rows, the same answer).
Verdict: REGRESSION ratio > 1 + t and the interval above 1; FASTER ratio < 1 - t and the
interval below 1; INCONCLUSIVE beyond t either way but the interval holds 1; else SAME.
A benchmark with a round lacking a finite time on either side is FAILED-RUN.
Exit: 0 no regression, 1 a REGRESSION or FAILED-RUN, 2 bad input.
"""
import argparse
import json
import math
import random
import statistics
import sys


def die(msg):
    print(f"ab_stats: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    rows = []
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    die(f"{path}:{n}: not JSON ({e.msg})")
                if not isinstance(r, dict) or r.get("side") not in ("a", "b") or not isinstance(r.get("bench"), str) \
                        or not isinstance(r.get("round"), int):
                    die(f"{path}:{n}: want {{round, side: a|b, bench, ms}}")
                rows.append(r)
    except OSError as e:
        die(f"{path}: {e.strerror}")
    if not rows:
        die(f"{path}: no rows")
    return rows


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def interval(ratios, seed, draws=2000):
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return meds[int(0.025 * draws)], meds[int(0.975 * draws) - 1]


def verdict(ratio, lo, hi, t):
    if ratio > 1 + t:
        return "REGRESSION" if lo > 1 else "INCONCLUSIVE"
    if ratio < 1 - t:
        return "FASTER" if hi < 1 else "INCONCLUSIVE"
    return "SAME"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threshold", type=float, default=7.0, help="percent (7)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--suspects", help="write the REGRESSION benchmarks' names here, one a line")
    ap.add_argument("rows")
    a = ap.parse_args()
    if not 0 <= a.threshold < 100:
        die(f"--threshold {a.threshold}: a percentage in [0, 100)")
    t = a.threshold / 100
    per = {}  # bench -> round -> side -> ms
    for r in load(a.rows):
        per.setdefault(r["bench"], {}).setdefault(r["round"], {})[r["side"]] = r.get("ms")
    print(f"{'benchmark':<18} {'A ms':>9} {'B ms':>9} {'B/A':>7}  {'95% interval':<15} verdict")
    regressed, failed = [], []
    for bench in sorted(per):
        rounds = per[bench]
        pairs = [(s.get("a"), s.get("b")) for _, s in sorted(rounds.items())]
        if not all(finite(x) and finite(y) for x, y in pairs):
            print(f"{bench:<18} {'-':>9} {'-':>9} {'-':>7}  {'-':<15} FAILED-RUN (a round without a finite time)")
            failed.append(bench)
            continue
        ratios = [y / x for x, y in pairs]
        ratio = statistics.median(ratios)
        lo, hi = interval(ratios, a.seed)
        v = verdict(ratio, lo, hi, t)
        am, bm = statistics.median(x for x, _ in pairs), statistics.median(y for _, y in pairs)
        print(f"{bench:<18} {am:>9.3f} {bm:>9.3f} {ratio:>7.3f}  [{lo:.3f}, {hi:.3f}]  {v}")
        if v == "REGRESSION":
            regressed.append(bench)
    n = len(next(iter(per.values())))
    if a.suspects:
        try:
            with open(a.suspects, "w") as f:
                f.writelines(b + "\n" for b in regressed)
        except OSError as e:
            die(f"{a.suspects}: {e.strerror}")
    if regressed:
        print(f"# ab: REGRESSION in {', '.join(regressed)} (B/A > {1 + t:.2f}, the interval above 1, {n} rounds)")
    if failed:
        print(f"# ab: FAILED-RUN in {', '.join(failed)}")
    if regressed or failed:
        return 1
    print(f"# ab: no regression beyond {a.threshold:g}% ({len(per)} benchmarks, {n} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
