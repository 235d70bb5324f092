#!/usr/bin/env python3
"""cost_sources.py: which figures a sim projection on a hardware profile rests on, and what
each is: measured, derived (from named figures or a measurement), datasheet (docs/REFERENCE.md
or a vendor's sheet), code (a count the code fixes), or assumed.

    python3 -m harness.sweep.cost_sources PROFILE [--precision paper|mixed|fp32] [--attention KERNEL]

Prints one JSON object {"profile", "figures": {figure: {"kind", "source"}}, "by_kind": {kind:
[figure...]}}. The figures are those the sim's cost model reads (megatrain/backends/sim/sim.h):
the profile's, each classified by its own `sources` entry (the nearest parent key where the
figure has none; the optional measured GPU rates where the profile has them and the projection is
bf16: gpu.gemm_bwd_efficiency, gpu.kernel_gbps.<kernel>, gpu.attention_work_tflops.<kernel>; and
host.grad_sumsq_gbps at any precision; each replacing the assumption it settles), and the sim's built-in constants, each `// assumed:` in
sim.h. A figure derived from a row measured on an engine commit that lacks a change the sim models
(experiments/sim_engine_changes.json) is said to be, in its source. sim_check.py prints the
summary beside its validation, so a projection says which of its figures were measured.
"""
import argparse
import json
import os
import re
import sys

from .common import REPO, die
from .. import resultslib
from ..calibrate_gpu_rates import KERNELS  # the kernels the sim prices by bytes

SIM_H = os.path.join(REPO, "megatrain", "backends", "sim", "sim.h")
PROFILE_H = os.path.join(REPO, "megatrain", "model", "hardware_profile.h")  # the sim's constants the planner shares
DEFINE = re.compile(r"^#define\s+(MT_SIM_\w+)\s+(\S+)\s*//\s*(assumed|measured|derived)[^:]*:\s*(.*)$")
SHA = re.compile(r"\bat ([0-9a-f]{7,40})\b")
# What the cost model takes as given beyond the profile's numbers (sim.h's formulas), each with
# what would settle it. Kept here, beside the classification, so the summary names them.
MODEL = {
    "sim: backward GEMMs at gpu.gemm_efficiency": (
        "assumed: the efficiency was measured on forward GEMMs only; mt-microbench gemm_bwd/cuda/bf16 "
        "(campaign part A) measures dinp + dw at Qwen2.5-14B's shapes"),
    "sim: attention table at any batch x heads": (
        "assumed: gpu.attention_tflops was measured at B 1, NH 28 per T; the rate at other B x NH "
        "(more work per launch) is taken to be the same; mt-microbench attention/cuda/bf16 (campaign part A) "
        "measures Qwen2.5-14B's batch 16 and 64 at T 1024"),
    "sim: host passes keep their rates beside the copies": (
        "assumed: a copy overlapped by host passes (drain, AdamW) gets its proportional share of "
        "host.shared_gbps (sim.h, 'host memory'), and the passes keep the rates measured alone, nor slow each "
        "other; the 14B-width trace (results/traces/gpu_c2_deepspeed-f23c3b2d5d68c48a.json, H200 host, "
        "2026-11-26) has a layer's weights in at 10.0 ms alone and 13.1-13.9 ms while AdamW runs (74% of the "
        "link's rate; the share prices 72%), and AdamW at 44.6 ms alone, 48.7 ms beside the h2d stream (5 "
        "spans); mt-microbench host_contention (AdamW with a pinned H2D copy running, campaign part A) "
        "measures both sides"),
    "sim: gradient sum of squares at host.mem_gbps": (
        "assumed: one read of the gradients at the triad's rate (mt-microbench grad_sumsq/bf16, campaign part A, "
        "measures the pass alone: host.grad_sumsq_gbps); the 14B-width trace "
        "(results/traces/gpu_c2_deepspeed-f23c3b2d5d68c48a.json, H200 host, 2026-11-26) has a layer's 'sum of "
        "squares' (275M bf16 gradients, 0.55 GB) at a median 11.3 ms, 49 GB/s, where this prices 4.8 ms; that was "
        "the eight-lane pass, bound by its adds' latency; since 50eab5b it keeps 32 lanes, 1.5-2x faster on the dev VM"),
    "sim: memory-bound kernels at MT_SIM_HBM_EFF x gpu.hbm_gbps": (
        "assumed: one efficiency for every family (norms, RoPE, SwiGLU, cross-entropy, embedding, add, "
        "cast), never timed at the model's shapes; the H200 kernel labs (results/labs/h200-G-kernel_labs.txt, "
        "2026-11-26, part G) timed them at other shapes only, e.g. add_rmsnorm v3 bf16 at 65% forward and 55% backward "
        "of the 4814 GB/s peak (R 16384, D 3584); mt-microbench kernel/cuda/bf16/* (campaign part A) measures "
        "them at Qwen2.5-14B's shapes in the sim's byte count"),
}


def classify(src):
    s = (src or "").strip().lower()
    if not s:
        return "assumed"
    if s.startswith("measured"):
        return "measured"
    if s.startswith("derived"):
        return "derived"
    if s.startswith("assumed") or " assumed" in s[:40]:
        return "assumed"
    if "docs/reference.md" in s or s.startswith("datasheet"):
        return "datasheet"
    if re.match(r"^[\w./-]+\.(c|h|py):", s):
        return "code"
    return "assumed"


def source_of(sources, fig):
    """The profile's source of a dotted figure: its own entry, else the nearest parent's."""
    parts = fig.split(".")
    while parts:
        k = ".".join(parts)
        if k in sources:
            return sources[k]
        parts.pop()
    return None


def derived_from(srcs, fig, src):
    """The sources of the figures a derivation names: dotted names as they stand, bare ones
    (adamw_gbps) under the figure's own section and mode (host.adamw_gbps.paper, host.adamw_gbps)."""
    parts, out = fig.split("."), []
    for n in set(re.findall(r"\b[a-z][a-z0-9_]*_[a-z0-9_]*(?:\.[a-z0-9_]+)*", src or "")):
        for cand in (n, f"{parts[0]}.{n}.{parts[-1]}", f"{parts[0]}.{n}"):
            if cand != fig and cand.split(".")[0] in ("gpu", "link", "host") and source_of(srcs, cand):
                out.append(source_of(srcs, cand))
                break
    return out


def stale_engine(src, changes, contains):
    """A note when `src` names a commit ('at <sha>') that lacks an engine change with timed effect
    that cannot be switched off."""
    m = SHA.search(src or "")
    if not m or contains is None:
        return None
    # A change the engine can switch off (sim_args_if_missing) leaves the measurement standing: the
    # engine still runs as it did then.
    missing = [c["commit"] for c in changes if c.get("timed_steps", True) and not c.get("sim_args_if_missing")
               and contains(c["commit"], m.group(1)) is False]
    return f"measured at {m.group(1)}, before {', '.join(missing)} (experiments/sim_engine_changes.json)" if missing else None


def sim_constants():
    out = {}
    for path, name in ((SIM_H, "sim.h"), (PROFILE_H, "model/hardware_profile.h")):
        with open(path) as f:
            for line in f:
                m = DEFINE.match(line.strip())
                if m:
                    out[f"{name} {m.group(1)} = {m.group(2)}"] = {"kind": m.group(3), "source": f"{name}: {m.group(4)}"}
    return out


def measured_rates(gpu, bf16, attention):
    """The optional measured GPU rates a bf16 projection prices with (sim.h; none at fp32), and the
    cost model's assumptions as they then stand: {figure: None}, {assumption: source}."""
    figs, model = [], dict(MODEL)
    if not bf16:
        return figs, model
    if "gemm_bwd_efficiency" in gpu:
        figs.append("gpu.gemm_bwd_efficiency")
        del model["sim: backward GEMMs at gpu.gemm_efficiency"]
    if attention in (gpu.get("attention_work_tflops") or {}):
        figs.append(f"gpu.attention_work_tflops.{attention}")
        del model["sim: attention table at any batch x heads"]
        model["sim: attention rate a function of B*NH*T^2 alone"] = (
            "assumed: the rate measured at a few launches (batch x heads x T) is read at the launch's work "
            "B*NH*T^2 whatever its T, log-interpolated between them and held flat beyond")
    kern = [k for k in KERNELS if k in (gpu.get("kernel_gbps") or {})]
    if kern:
        figs += [f"gpu.kernel_gbps.{k}" for k in kern]
        rest = [k for k in KERNELS if k not in kern] + ["memset", "D2D copies"]
        model.pop("sim: memory-bound kernels at MT_SIM_HBM_EFF x gpu.hbm_gbps")
        model["sim: unmeasured memory-bound ops at MT_SIM_HBM_EFF x gpu.hbm_gbps"] = (
            "assumed: one efficiency for the ops without a gpu.kernel_gbps key (" + ", ".join(rest) + ")")
    return figs, model


def cost_sources(profile, precision="paper", attention="cudnn", changes=None, contains=None):
    try:
        p = resultslib.hardware_profile(profile)
    except ValueError as e:  # a name that is a path (safepath), a file that is not strict JSON
        die(str(e))
    if p is None:
        die(f"no hardware profile {profile!r}")
    srcs = p.get("sources") or {}
    gpu = p.get("gpu") or {}
    act = "fp32" if precision == "fp32" else "bf16"
    figs = [f"gpu.peak_tflops.{act}", "gpu.gemm_efficiency", "gpu.hbm_gbps", "link.h2d_gbps.pinned",
            "link.h2d_gbps.pageable", "link.d2h_gbps.pinned", "link.d2h_gbps.pageable", "link.duplex_factor",
            "host.mem_gbps", f"host.adamw_params_per_s.{precision}"]
    rates, model = measured_rates(gpu, act == "bf16", attention)
    if "shared_gbps" in (p.get("host") or {}):  # stated with its source; else the highest measured host rate
        figs.append("host.shared_gbps")
    if "grad_sumsq_gbps" in (p.get("host") or {}):  # the drain's pass measured: its assumption settled
        rates.append("host.grad_sumsq_gbps")
        model.pop("sim: gradient sum of squares at host.mem_gbps", None)
    by_work = any(f.startswith("gpu.attention_work_tflops.") for f in rates)  # then the table by T is not read
    if not by_work and attention in (gpu.get("attention_tflops") or {}):
        figs.append(f"gpu.attention_tflops.{attention}")
    elif not by_work:
        figs.append("model/hardware_profile.h MT_ATTN_ASSUMED_EFF x peak (no attention table)")
    figs += rates
    out = {}
    for f in figs:
        if f.startswith("model/"):
            out[f] = {"kind": "assumed", "source": "no measured attention rate in the profile"}
            continue
        src = source_of(srcs, f)
        d = {"kind": classify(src), "source": src or "(no source)"}
        # a derived figure is as good as the figures it names (host.adamw_gbps.paper, ...): derived
        # from an assumption it is assumed, from a datasheet figure a datasheet figure
        named = derived_from(srcs, f, src) if d["kind"] == "derived" else []
        kinds = {classify(x) for x in named}
        for weak in ("assumed", "datasheet"):
            if weak in kinds:
                d["kind"] = weak
                d["source"] += f" (from {weak} figures)"
                break
        note = next((n for n in (stale_engine(x, changes or [], contains) for x in [src] + named) if n), None)
        if note:
            d["engine"] = note
        out[f] = d
    out.update(sim_constants())
    out.update({k: {"kind": "assumed", "source": v} for k, v in model.items()})
    by = {}
    for f, d in out.items():
        by.setdefault(d["kind"], []).append(f)
    return {"profile": profile, "figures": out, "by_kind": by}


def summary(cs):
    """One line: each kind with its figures; a figure measured on an older engine marked so."""
    parts = []
    for kind in ("measured", "derived", "code", "datasheet", "assumed"):
        fs = cs["by_kind"].get(kind)
        if fs:
            parts.append(f"{kind}: " + ", ".join(
                f + (" [" + cs["figures"][f]["engine"] + "]" if cs["figures"][f].get("engine") else "") for f in fs))
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--precision", default="paper", choices=("paper", "mixed", "fp32"))
    ap.add_argument("--attention", default="cudnn")
    args = ap.parse_args()
    print(json.dumps(cost_sources(args.profile, args.precision, args.attention), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
