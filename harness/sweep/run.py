#!/usr/bin/env python3
"""run.py: runs one sweep (experiments/sweeps/NAME.json) and writes one results row
per configuration to results/<experiment>.jsonl (docs/DESIGN.md#results).

    python3 -m harness.sweep.run experiments/sweeps/c2_cpu.json [--bin DIR]
        [--out-dir results] [--force] [--only SUBSTR] [--keys K,...] [--dry-run] [--timeout S]
        [--hardware PROFILE]

The sweep owns its file: a run rewrites it from the sweep, so rows of entries that
no longer exist (or of another --hardware override) are dropped.

Modes (the row's `mode` is always set, never inferred by a reader):
  measured        `megatrain train` on a real backend (cpu, cuda)
  extrapolated    `megatrain train` at >= 2 truncated depths (real width) and one
                  held-out depth; step time fitted linear in layers, reported at the
                  model's full depth with the error the held-out check gives
  projected       `megatrain train --backend sim --hardware H` (virtual time), plus
                  `megatrain plan` for feasibility and memory
  projected-plan  `megatrain plan --hardware H` only (the analytic model); the row's
                  mode is `projected` and its `backend` is `plan`
A configuration with "peer" runs a real peer instead (baselines/peers/PEER.py, mode
measured): its row is made the same way, with the system the peer names.
Resumable: a configuration whose key is already in the output file is skipped
(unless --force). A failing configuration is recorded with an `error` field and
the sweep goes on; the exit status is 1 if any configuration failed in this run.
Progress and ETA go to stderr. See harness/sweep/README.md for the sweep format.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from . import common, sweeps
from .common import REPO
from .megatrain_cli import Runner, RunError, Unreached  # running the CLI
from .one_config import blank_row, run_config  # one configuration into its row
from .. import resultslib
from ..resultslib import load_avg as host_load
from .sweeps import config_key, expand, label


# ---------------------------------------------------------------- main
def fmt_s(s):
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep", nargs="+", help="sweep JSON file(s)")
    ap.add_argument("--bin", help="directory of megatrain and mt-env (default $MT_BIN or build/bin)")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "results"), help="results directory (default results/)")
    ap.add_argument("--force", action="store_true", help="re-run configurations already in the results file")
    ap.add_argument("--only", help="run only configurations whose label contains this string")
    ap.add_argument("--keys", help="run only the configurations with these config keys (comma-separated): "
                                   "the campaign's completion of a part that stopped short")
    ap.add_argument("--dry-run", action="store_true", help="list the configurations and exit")
    ap.add_argument("--timeout", type=int, help="per-command time limit in seconds (default: per config, 900)")
    ap.add_argument("--hardware", help="replace the hardware profile of every projected configuration "
                    "(e.g. h200-128g when the GPU sweeps run on the H200 machine)")
    ap.add_argument("--deadline", type=float, help="epoch seconds: a configuration whose expect_s no longer fits "
                    "before it is not started (reported as not reached), and no command runs past it")
    ap.add_argument("--skip-peer", action="append", default=[], metavar="PEER=REASON",
                    help="do not run this peer's configurations, reporting them as not reached for REASON "
                    "(its setup failed or was skipped)")
    args = ap.parse_args()
    skip_peers = {}
    for x in args.skip_peer:
        name, _, why = x.partition("=")
        skip_peers[name] = why or "skipped"
    args.skip_peers = skip_peers
    if args.hardware:  # a profile's plain name (or a .json path), refused before any sweep runs
        try:
            if resultslib.hardware_profile(args.hardware) is None:
                common.die(f"--hardware {args.hardware}: no such profile in {resultslib.hardware_dir()}")
        except ValueError as e:  # safepath.PathError, schema.RowsError
            common.die(f"--hardware: {e}")

    todo_sweeps = []
    for p in args.sweep:
        s = sweeps.with_hardware(sweeps.load(p), args.hardware)
        todo_sweeps.append((s, expand(s)))

    if args.dry_run:
        for s, cs in todo_sweeps:
            for c in cs:
                print(f"{s['experiment']}\t{c['mode']}\t{config_key(c)}\t{label(c)}")
        return 0

    os.makedirs(args.out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="mt-sweep-")
    failed = 0
    try:
        R = Runner(common.bin_dir(args.bin), tmp, args.timeout)
        R.out_dir = args.out_dir
        R.deadline = args.deadline
        for s, cs in todo_sweeps:
            failed += run_sweep(R, s, cs, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        print(f"sweep: {failed} configuration(s) failed (rows with an 'error' field)", file=sys.stderr)
    return 1 if failed else 0


def run_sweep(R, s, cs, args):
    """Runs one sweep into <out-dir>/<experiment>.jsonl. The sweep owns its file: rows
    whose configuration is no longer in the sweep (a removed or changed entry, another
    experiment, another hardware override) are dropped, and the file is rewritten in
    the sweep's order after every configuration (one atomic rename each)."""
    exp, out = s["experiment"], os.path.join(args.out_dir, s["experiment"] + ".jsonl")
    keys = [config_key(c) for c in cs]
    old = {}
    dropped = 0
    for r in common.load_rows(out):
        if r.get("experiment") == exp and r.get("config_key") in keys:
            old[r["config_key"]] = r  # the last row of a key wins (files from before ownership)
        else:
            dropped += 1
            if r.get("trace") and os.path.exists(common.trace_path(args.out_dir, r)):
                os.remove(common.trace_path(args.out_dir, r))  # its trace goes with it
    want = set(args.keys.split(",")) if getattr(args, "keys", None) else None
    todo = [c for c in cs if (not args.only or args.only in label(c)) and (want is None or config_key(c) in want)]
    skip = [c for c in todo if config_key(c) in old and not args.force]
    todo = [c for c in todo if c not in skip]
    print(f"sweep {exp}: {len(cs)} configurations, {len(skip)} already in {out}, {len(todo)} to run"
          + (f"; {dropped} row(s) of entries no longer in the sweep dropped" if dropped else ""), file=sys.stderr)
    common.write_jsonl(out, [old[k] for k in keys if k in old])
    sweep_file, override = sweeps.rel_path(s["_path"]), args.hardware
    failed, t_start = 0, time.time()
    unreached = []  # configurations not run, with why: <out-dir>/<experiment>.unreached.json
    for i, c in enumerate(todo, 1):
        t0 = time.time()
        why = not_reached(R, c, getattr(args, "skip_peers", {}))
        if why:
            unreached.append({"label": label(c), "config_key": config_key(c), "reason": why})
            write_unreached(args.out_dir, exp, unreached)
            print(f"  [{i}/{len(todo)}] {label(c)}: not reached: {why}", file=sys.stderr)
            continue
        load0 = host_load()
        try:
            row = run_config(R, exp, c, sweep_file, override)
        except Unreached as e:
            unreached.append({"label": label(c), "config_key": config_key(c), "reason": str(e),
                              "seconds": round(time.time() - t0, 1)})
            write_unreached(args.out_dir, exp, unreached)
            print(f"  [{i}/{len(todo)}] {label(c)}: not reached: {e}", file=sys.stderr)
            continue
        except (RunError, KeyError, ValueError, ZeroDivisionError, OSError) as e:
            row = blank_row(exp, c, R.env(c["hardware"] if c["mode"].startswith("projected") else None),
                            sweep_file, override)
            row["error"] = str(e) if isinstance(e, RunError) else f"{type(e).__name__}: {e}"
            failed += 1
        # the 1-minute load average before and after: how much else ran beside a measured row
        extra = {"wall_s": round(time.time() - t0, 3), "host_load": [load0, host_load()] if load0 is not None else None}
        row.update(extra)
        bad = resultslib.schema.made_row_problems(row)
        if bad:  # a row the readers would refuse (a NaN, an inverted range) is the run's error, not a row
            failed += "error" not in row
            row = dict(blank_row(exp, c, R.env(c["hardware"] if c["mode"].startswith("projected") else None),
                                 sweep_file, override), **extra,
                       error="the row check refused the row it made: " + "; ".join(bad))
        old[row["config_key"]] = row
        common.write_jsonl(out, [old[k] for k in keys if k in old], shape="results")
        el = time.time() - t_start
        eta = el / i * (len(todo) - i)
        what = ("ERROR " + row["error"]) if "error" in row else (
            f"{row['step_ms']['median']:.1f} ms/step" + (f" (+/-{100 * row['step_ms']['err_frac']:.0f}%)"
                                                        if "err_frac" in row["step_ms"] else "")
            + (f"; WARNING: {row['fit']['bar_too_wide']}" if (row.get("fit") or {}).get("bar_too_wide") else "")
            if row["step_ms"] else ("does not fit" if row.get("fits") is False else "no timing"))
        print(f"  [{i}/{len(todo)}] {label(c)}: {what}  ({time.time() - t0:.1f} s, ETA {fmt_s(eta)})",
              file=sys.stderr)
    write_unreached(args.out_dir, exp, unreached)
    return failed


def not_reached(R, c, skip_peers):
    """Why a configuration is not started, or None: its peer's setup failed, or what its
    expect_s says it needs no longer fits before --deadline."""
    if c.get("peer") in skip_peers:
        return f"{c['peer']}: {skip_peers[c['peer']]}"
    if R.deadline is not None:
        left = R.deadline - time.time()
        need = c.get("expect_s") or 30
        if left < need:
            return f"no time left: it needs about {need:.0f} s, {max(0, left):.0f} s were left"
    return None


def write_unreached(out_dir, exp, unreached):
    """The configurations this run did not reach (not JSON lines: no results rows), rewritten
    whole; removed when there are none."""
    path = os.path.join(out_dir, exp + ".unreached.json")
    if not unreached:
        if os.path.exists(path):
            os.remove(path)
        return
    with open(path + ".tmp", "w") as f:
        json.dump(unreached, f, indent=1)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
