#!/usr/bin/env python3
"""sim_check.py: the sim, on the calibrated profile of the GPU that measured each row, against
every measured GPU configuration: `megatrain train --backend sim` is re-run here (so a drift of
the cost model fails the check), never read from committed projections.

    python3 -m harness.sweep.sim_check [--results results] [--out results/sim_validation.json]
                                       [--bin DIR] [--changes FILE] [--known FILE] [--no-write]

Which rows: the measured megatrain rows of the experiments the sim-vs-measured claim row
names (`against` of the `validation` claim in experiments/sweeps/gpu_predicted.json). Each is
re-run in the sim from its own sweep configuration (same model, depth, batch, sequence,
precision, schedule, options, steps and warm-up) on the profile of its GPU (gpu.name_match).

Whether a row validates today's sim: the engine changes that the sim models are listed in
experiments/sim_engine_changes.json; a row validates the current engine when its tree was
clean and its commit contains every change whose effect its timed steps run (git merge-base
--is-ancestor). A row that does not is still compared and printed, with why; it takes no part
in the verdict or the band. A change may say how the measured steps ran where the sim cannot
know it (`sim_args`: the speculative step is off after a clipping step, and the sim's norm
never clips); those options are applied to the rows that contain the change. A change the
engine can still switch off (`sim_args_if_missing`: --embedding-rows-first false) is no reason
to set a row aside: the rows that lack it are simulated with the switch off, as they ran.

A configuration whose batch is 'auto' is re-run at the batch and with the knobs its row says
`train --batch auto` chose (sweeps.as_run): the sim prices the step that was measured, not its
own pick.

Per configuration it prints the measured and simulated step, the error, the phases that differ
most (the rows' per-phase medians: compute, h2d/d2h copies, drain, optimizer, and the GPU's
waits opt_wait_ms / drain_wait_ms), where the row kept its trace the spans that differ most
(span_check.py: per lane and span, the sim's own trace against the measured one), and the verdict. The check passes when every validating
row is within `within` (0.10, the claim's) plus the row's own noise (claims.noise: half its
min..max over the median); otherwise it names the configurations and exits 1. A miss recorded in
experiments/sim_known_misses.json (--known: its profile, key, cause and the measurement that will
settle it) is printed as KNOWN MISS and does not fail; a recorded miss that is back inside the
band, or that the check no longer has, fails it (the record is out of date). Per profile it
also prints which of the sim's figures were measured, derived, taken from a datasheet or assumed
(cost_sources.py), a figure derived from a row of an older engine marked so. With no
validating row at all it exits 1 too: nothing would be checked. Writes --out (schema
megatrain.sim_validation/1, docs/DESIGN.md#results) unless --no-write.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from . import common, sweeps
from .cost_sources import cost_sources, summary
from .common import REPO, trace_path
from .megatrain_cli import RunError, Runner
from .. import resultslib
from . import span_check
from ..resultslib import median, noise, ok
from ..resultslib import row_label as label

SCHEMA = "megatrain.sim_validation/1"
PHASES = ("compute_ms", "h2d_ms", "d2h_ms", "drain_ms", "optimizer_ms", "opt_wait_ms", "drain_wait_ms")
GROWTH = ("Inside the measured region (a configuration of a model width, batch and sequence length "
          "between the measured rows', on the calibrated profile's GPU and host) a projection carries "
          "the worst error of the measured configurations that validate the current engine; outside it "
          "(another width or shape range, another host, another GPU, or a profile with datasheet or "
          "assumed figures) nothing has been validated, so the band is at least that and unbounded "
          "until rows measured there validate it.")


def fail(msg):
    print(f"sim_check: {msg}", file=sys.stderr)
    sys.exit(1)


def predicted_claim():
    """The `validation` claim row (the sim vs measured, claims.py): its experiments and tolerance."""
    for s in sweeps.all_sweeps():
        for spec in s.get("claims", []):
            if spec.get("test") == "validation":
                return spec
    fail("no sweep declares a 'validation' claim row; HINT: experiments/sweeps/gpu_predicted.json holds it")


def load_known(path):
    """{(profile, key): entry} of the known-misses record; bad input exits 2 naming the file."""
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError as e:
        print(f"sim_check: {path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    except json.JSONDecodeError as e:
        print(f"sim_check: {path}:{e.lineno}: not JSON ({e.msg})", file=sys.stderr)
        sys.exit(2)
    out = {}
    for i, m in enumerate(d.get("misses", []) if isinstance(d, dict) else [None]):
        if not isinstance(m, dict) or not all(isinstance(m.get(k), str) and m[k] for k in
                                              ("profile", "key", "cause", "settle")) \
                or not isinstance(m.get("err"), (int, float)):
            print(f"sim_check: {path}: misses[{i}] needs profile, key, err, cause and settle", file=sys.stderr)
            sys.exit(2)
        out[(m["profile"], m["key"])] = m
    return out


def git_contains(change, sha):
    """True when commit `sha` has `change` in its history; None when git cannot tell."""
    try:
        p = subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", change, sha],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return True if p.returncode == 0 else False if p.returncode == 1 else None


def engine_verdict(row, changes):
    """(validates, why, sim_args) for a measured row against the engine changes."""
    env = row.get("env") or {}
    sha = env.get("git_sha")
    if resultslib.tree_state(row) != "clean" or not sha:
        return False, "measured on a dirty or unknown tree: its engine is not a commit", []
    missing, args, skipped = [], [], []
    for c in changes:
        has = git_contains(c["commit"], sha)
        if has is None:
            fail(f"git cannot tell whether {sha} contains {c['commit']}; HINT: run in a clone with the full "
                 "history (git fetch --unshallow)")
        if has:
            args += c.get("sim_args", [])
        elif c.get("sim_args_if_missing"):  # the engine can still run as the row's did: the sim is told so
            args += c["sim_args_if_missing"]
            skipped.append(f"{c['commit']} ({c['short']}: the sim runs with {' '.join(c['sim_args_if_missing'])})")
        elif c.get("timed_steps", True):
            missing.append(f"{c['commit']} ({c['short']})")
        else:
            skipped.append(f"{c['commit']} ({c['short']}: {c.get('why_not_timed', 'not run in timed steps')})")
    if missing:
        return False, f"measured at {sha}, before " + "; ".join(missing), args
    why = f"measured at {sha}, which contains every engine change the sim models"
    if skipped:
        why += "; lacks only " + "; ".join(skipped)
    return True, why, args


def sim_row(R, c, profile, extra_args, trace=None):
    """The sim's step medians for configuration c on `profile`, as run.py computes them (its
    Chrome trace written to `trace` when given)."""
    sc = dict(c, backend="sim", hardware=profile, mode="projected", args=list(c["args"]) + extra_args,
              keep_trace=False)
    cfg_path, _, _ = R.model_config(sc, sc["layers"])
    steps = R.train(sc, cfg_path, trace)
    timed = steps[sc["warmup"]:-1]
    out = {"step_ms": median([s["step_ms"] for s in timed])}
    for k in PHASES:
        v = [s[k] for s in timed if isinstance(s.get(k), (int, float))]
        out[k] = median(v) if v else None
    return out


def depth_rows(r):
    """An extrapolated GPU row's measured depths (fit.measured), each as a measured row of that
    depth, so that the sim is re-run against every depth the GPU ran (issue 45's width rows)."""
    if r.get("mode") != "extrapolated":
        return []
    out = []
    for d in (r.get("fit") or {}).get("measured") or []:
        m = dict(r, mode="measured", layers_run=d["depth"], depth_of="extrapolated", trace=None,
                 step_ms={"median": d["step_ms"], "min": d["step_ms_min"], "max": d["step_ms_max"], "n": d["n"]})
        for k in PHASES:
            m[k] = d.get(k)
        out.append(m)
    return out


def phase_diffs(m, s):
    """Phases ordered by |sim - measured| (ms), the largest first."""
    d = [(k, s[k] - m[k], m[k]) for k in PHASES if isinstance(m.get(k), (int, float)) and s.get(k) is not None]
    return sorted(d, key=lambda t: -abs(t[1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(REPO, "results"))
    ap.add_argument("--out", default=None, help="default: <results>/sim_validation.json")
    ap.add_argument("--bin", help="directory of the megatrain binaries (default $MT_BIN, else build/bin)")
    ap.add_argument("--changes", default=os.path.join(REPO, "experiments", "sim_engine_changes.json"))
    ap.add_argument("--known", default=os.path.join(REPO, "experiments", "sim_known_misses.json"),
                    help="the known misses (default experiments/sim_known_misses.json)")
    ap.add_argument("--no-write", action="store_true", help="check only; write nothing")
    args = ap.parse_args()

    spec = predicted_claim()
    within = float(spec["within"])
    with open(args.changes) as f:
        changes = json.load(f)["changes"]
    known = load_known(args.known)
    seen_known, stale = set(), []
    meas, inputs = [], [args.changes]
    for exp in spec["against"]:
        path = os.path.join(args.results, exp + ".jsonl")
        inputs.append(path)
        if os.path.exists(path):
            meas += [r for r in common.load_rows(path)
                     if ok(r) and r.get("mode") in ("measured", "extrapolated") and r.get("backend") == "cuda"
                     and r.get("system") == "megatrain"]
    meas = [d for r in meas for d in depth_rows(r)] + [r for r in meas if r.get("mode") == "measured"]
    if not meas:
        fail(f"no measured megatrain GPU row in {args.results} for {', '.join(spec['against'])}")
    out_path = args.out or os.path.join(args.results, "sim_validation.json")
    if not args.no_write:
        common.not_own_input(out_path, inputs)

    profiles, bad = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        R = Runner(common.bin_dir(args.bin), tmp, timeout=300)
        for m in meas:
            gpu = (m.get("env") or {}).get("gpu_name")
            prof = resultslib.profile_of_gpu(gpu)
            key = label(m)
            if not prof:
                fail(f"{key}: no profile matches GPU {gpu!r}; HINT: gpu.name_match in experiments/hardware/*.json")
            cfgs = sweeps.current_configs(m["experiment"], sweeps.row_override(m)) or {}
            c = cfgs.get(m.get("config_key"))
            if c is None:  # a row its sweep no longer produces: said, never dropped in silence
                fail(f"{key}: its sweep entry ({m['experiment']}, key {m.get('config_key')}) no longer exists; "
                     "HINT: restore the configuration in its sweep file, or re-measure")
            validates, why, extra = engine_verdict(m, changes)
            kept = trace_path(args.results, m) if m.get("trace") else None
            kept = kept if kept and os.path.isfile(kept) else None
            sim_trace = os.path.join(tmp, "sim-trace.json") if kept else None
            try:
                run = sweeps.as_run(c, m)
                if m.get("depth_of"):  # one depth of an extrapolated row: the sim runs that depth
                    run = dict(run, layers=m["layers_run"])
                s = sim_row(R, run, prof, extra, sim_trace)
            except RunError as e:
                fail(f"{key}: the sim failed: {e}")
            mm = m["step_ms"]["median"]
            err = s["step_ms"] / mm - 1
            nm = noise(m)
            inside = abs(err) <= within + nm
            if extra:
                why += " (sim run with " + " ".join(extra) + ")"
            diffs = phase_diffs(m, s)
            miss = known.get((prof, key)) if validates else None
            verdict = ("ok" if inside else "KNOWN MISS" if miss else "OUTSIDE") if validates else "not counted"
            print(f"{key}: measured {mm:.0f} ms, sim {s['step_ms']:.0f} ms, {100 * err:+.1f}% "
                  f"(noise ±{100 * nm:.1f}%) [{verdict}]")
            print("    phases, sim - measured: " + ", ".join(
                f"{k[:-3]} {d:+.0f} ms ({mv:.0f} measured)" for k, d, mv in diffs[:3]))
            spans = span_check.compare(kept, sim_trace, c) if kept else None
            if spans:
                print("    spans, measured -> sim (median; the costliest a step first): "
                      + "; ".join(span_check.describe(d) for d in spans[:4]))
                company = [d for d in spans if d.get("beside")][:3]
                if company:
                    print("    measured spans by what ran beside them: "
                          + "; ".join(span_check.describe_beside(d) for d in company))
            print(f"    validates the current engine: {'yes' if validates else 'no'}: {why}")
            if miss:
                seen_known.add((prof, key))
                if inside:
                    stale.append(f"{key} ({prof}) is back inside at {100 * err:+.1f}% (recorded {100 * miss['err']:+.1f}%)")
                else:
                    print(f"    known miss (recorded {100 * miss['err']:+.1f}%): {miss['cause']}; settles it: {miss['settle']}")
            elif validates and not inside:
                bad.append(f"{key} {100 * err:+.1f}%")
            p = profiles.setdefault(prof, {"gpu": gpu, "configs": []})
            p["configs"].append({"key": key, "measured_ms": round(mm, 3), "sim_ms": round(s["step_ms"], 3),
                                 "err": round(err, 4), "validates_current_engine": validates, "why": why})
            if spans:
                p["configs"][-1]["spans"] = spans

    for name, p in profiles.items():
        errs = sorted(abs(c["err"]) for c in p["configs"] if c["validates_current_engine"])
        p["n"] = len(errs)
        p["worst_abs_err"] = errs[-1] if errs else None
        p["median_abs_err"] = round(median(errs), 4) if errs else None
        p["within"] = within
        profiles[name] = {k: p[k] for k in ("gpu", "n", "worst_abs_err", "median_abs_err", "within", "configs")}
        print(f"{name} ({p['gpu']}): {p['n']} of {len(p['configs'])} configurations validate the current engine; "
              + (f"worst |err| {100 * p['worst_abs_err']:.1f}%, median {100 * p['median_abs_err']:.1f}%"
                 if errs else "none to compare"))
        print(f"{name}: what the sim's figures rest on (cost_sources.py, paper precision): "
              + summary(cost_sources(name, changes=changes, contains=git_contains)))
    out = {"schema": SCHEMA, "profiles": profiles, "growth": GROWTH}
    if not args.no_write:
        common.write_text(out_path, json.dumps(out, indent=1) + "\n", inputs)
    if not any(p["n"] for p in profiles.values()):
        fail("no measured row validates the current engine: nothing was checked; HINT: measure on the GPU "
             "(ci/gpu_campaign.sh) with the current engine")
    stale += [f"{k} ({p}) is no longer a validating configuration" for p, k in sorted(set(known) - seen_known)]
    if bad:
        fail(f"outside ±{100 * within:.0f}% (plus the row's noise): " + "; ".join(bad)
             + (f"; and the known-miss record is out of date: {'; '.join(stale)}" if stale else ""))
    if stale:
        fail(f"a known miss no longer misses: {'; '.join(stale)}; HINT: update {os.path.relpath(args.known, REPO)} "
             "(remove the entry, or record the new error and why)")
    kn = [f"{k} ({p})" for p, k in sorted(seen_known)]
    print(f"sim_check: every configuration that validates the current engine is within ±{100 * within:.0f}%"
          + (f", except {len(kn)} known miss(es) recorded in {os.path.relpath(args.known, REPO)}: {', '.join(kn)}"
             if kn else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
