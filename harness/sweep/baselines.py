#!/usr/bin/env python3
"""baselines.py: records the regression baselines ci/check_regression.sh reads by
default (results/baselines/*.jsonl).

    python3 -m harness.sweep.baselines sim [--from results] [--out results/baselines]
        the rows of every sweep marked "baseline": true (deterministic projections: the
        sim backend and the planner) -> sim.jsonl. CI re-runs those sweeps on every
        `make test` and compares (harness/tests/test_regression_baselines.sh, two-sided:
        a projection that moves either way fails until the baselines are re-recorded).
    python3 -m harness.sweep.baselines gpu [--from results] [--out results/baselines]
        the rows measured on a GPU (backend cuda, mode measured) -> gpu_<gpu name>.jsonl,
        one file per GPU; after a GPU campaign has been filed (file_rows.py). Later runs
        on that GPU compare with: ci/check_regression.sh results/gpu_c2.jsonl

Only rows the claims table would take are recorded: from a clean tree, of sweep entries
that exist now, without an error. A baseline row keeps what the checker compares.
"""
import argparse
import glob
import os
import re
import sys

from . import common, sweeps, trust
from .common import REPO, die

KEEP = ("schema", "experiment", "system", "mode", "model", "params", "layers_run", "layers_model", "batch",
        "seq_len", "precision", "variant", "hardware", "backend", "fits", "step_ms", "tokens_per_s", "tflops",
        "h2d_gbps", "peak_gpu_bytes", "peak_host_bytes", "config_key")


def trim(r):
    b = {k: r.get(k) for k in KEEP}
    if (r.get("config") or {}).get("host_mem_gb") is not None:
        b["config"] = {"host_mem_gb": r["config"]["host_mem_gb"]}
    env = r.get("env") or {}
    b["env"] = {k: env.get(k) for k in ("git_sha", "gpu_name", "utc")}
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("sim", "gpu"))
    ap.add_argument("--from", dest="src", default=os.path.join(REPO, "results"))
    ap.add_argument("--out", default=os.path.join(REPO, "results", "baselines"))
    args = ap.parse_args()
    inputs = glob.glob(os.path.join(args.src, "*.jsonl"))
    for old in glob.glob(os.path.join(args.out, "*.jsonl")):  # a baseline file is never one it reads
        common.not_own_input(old, inputs, "--out")
    rows = [r for r in trust.trusted(common.load_results(args.src), False, "baselines") if "error" not in r]
    os.makedirs(args.out, exist_ok=True)
    if args.what == "sim":
        exps = [s["experiment"] for s in sweeps.all_sweeps() if s.get("baseline")]
        keep = [trim(r) for e in exps for r in rows if r.get("experiment") == e and r["mode"] == "projected"]
        missing = [e for e in exps if not any(r["experiment"] == e for r in keep)]
        if missing:
            die(f"no clean rows of {', '.join(missing)} in {args.src}; HINT: run the sweeps from a clean tree first")
        path = os.path.join(args.out, "sim.jsonl")
        common.write_jsonl(path, keep)
        print(f"baselines: {len(keep)} projected rows of {len(exps)} sweeps -> {path}", file=sys.stderr)
        return 0
    by_gpu = {}
    for r in rows:
        if r["mode"] == "measured" and r.get("backend") == "cuda" and (r.get("env") or {}).get("gpu_name"):
            by_gpu.setdefault(r["env"]["gpu_name"], []).append(trim(r))
    if not by_gpu:
        die(f"no clean rows measured on a GPU in {args.src}; HINT: file a GPU campaign first (file_rows.py)")
    for gpu, rs in sorted(by_gpu.items()):
        path = os.path.join(args.out, "gpu_" + re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") + ".jsonl")
        common.write_jsonl(path, rs)
        print(f"baselines: {len(rs)} rows measured on {gpu} -> {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
