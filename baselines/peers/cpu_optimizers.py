#!/usr/bin/env python3
"""cpu_optimizers.py: the peers' CPU optimizers beside ours and the STREAM triad, in one run.

    python3 -m baselines.peers.cpu_optimizers [--n 67108864] [--repeats 5] [--threads T]
        [--bin build/bin] [--out results/cpu_optimizers.jsonl]

Each repeat is one round over every implementation in turn (so load on a shared machine
falls on all of them alike), with the same thread count for all:
  triad                 mt-microbench triad/<n> (24 B per double, STREAM's convention)
  megatrain_adamw       mt-microbench adamw/fp32/<n> (our mt_adamw_update, fp32 states)
  deepspeed_cpu_adam    DeepSpeedCPUAdam (adamw_mode=True), its cpu_adam op JIT-built here
  torch_adamw_foreach   torch.optim.AdamW(foreach=True)
  torch_adamw_fused     torch.optim.AdamW(fused=True) on the CPU
All AdamW steps run over one fp32 parameter tensor of n elements with an fp32 gradient
and fp32 moments (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1).

Bytes per parameter, one convention for every implementation (harness/microbench/adamw.c):
the least traffic an fp32 AdamW step can make, 28 B = read p, g, m, v (16) + write p, m, v
(12), no write-allocate. An implementation that moves more (torch's foreach path makes
temporaries) shows as a lower bytes_per_s, not as more bytes. ratio_to_triad is each
round's bytes_per_s over that round's triad GB/s, the median over rounds: it is what a peer
model scales by a target host's triad bandwidth.

--layouts (the GPU campaign's cpu_adam step, issue 37): ours and DeepSpeedCPUAdam in the same
layout, the one both train the C2 comparison with, ours in paper precision beside it, and the
host's memory bound for each; every row says its layout and its bytes per parameter:
  megatrain_adamw_mixed     mt-microbench adamw/mixed: f32 master, m, v; bf16 gradient in (as our
                            GPU hands it over), bf16 parameter out
  deepspeed_cpu_adam_mixed  DeepSpeedCPUAdam over f32 parameter (the master), m, v and the f32
                            gradient ZeRO-3 hands over, then the bf16 parameter copy ZeRO-3 makes of
                            the updated partition (torch copy_, on the CPU with offload_param)
  megatrain_adamw_paper     mt-microbench adamw/paper: bf16 parameter and gradient, f32 m, v (the
                            official code's precision; no master)
  deepspeed_cpu_adam        the DeepSpeedCPUAdam pass alone of the mixed step (f32 p g m v): what
                            the engine's peer model reads (engine/peer.c)
Bytes per parameter count what the hardware moves: reads, writes and the write-allocate read of
a line written but not read (no non-temporal stores in either code), e.g. ours mixed 28 + 2 (p
out), DeepSpeed mixed 28 + 8 (the copy: read 4, write 2, allocate 2). The bound: the triad over
the same n (n doubles, 24 B/element held), counted at 32 B/element (b, c read, a written and
allocated), divided by each row's bytes: bound_params_per_s and frac_of_bound (per round, the
median). n defaults to LLC_MULTIPLE times the last-level cache over the smallest state held
(paper's 12 B/param; sysfs, lscpu as fallback), so that every working set is at least that many
times the cache; every implementation runs at --threads (default: all). ratio_to_deepspeed
(mixed rows only: same layout) is ours over DeepSpeed's params/s, per round, the median.
--no-peers (CI; with --layouts): ours and the bound only, torch and DeepSpeed not imported.

Writes one row per implementation to --out (rewritten whole). Exit 77 (skipped) when torch
or deepspeed cannot be imported (unless --no-peers) or mt-microbench is missing: CI does not install them; the
committed results/cpu_optimizers.jsonl was measured by hand (baselines/peers/README.md).
Progress on stderr; the rows also on stdout, one JSON object per line.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from . import common  # first (T0): log, skip, the load average, the env block; stdlib only
from harness.resultslib import spread as stats  # median, min, max

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA = "megatrain.cpu_optimizers/1"
BYTES_PER_PARAM = 28  # fp32 AdamW: read p g m v, write p m v (harness/microbench/adamw.c)
TRIAD_BYTES_PER_ELEMENT = 24
LR, BETAS, EPS, WD = 3e-4, (0.9, 0.95), 1e-8, 0.1
IMPLS = ("megatrain_adamw", "deepspeed_cpu_adam", "torch_adamw_foreach", "torch_adamw_fused")
# --layouts: bytes per parameter as the hardware moves them (hw) and as reads + writes alone (rw),
# the state held, and where the rate comes from (mt-microbench family, or a torch stepper)
LAYOUTS = {
    "megatrain_adamw_mixed": {
        "layout": "mixed", "bench": "mixed", "held": 16, "rw": 28, "hw": 30,
        "state": "f32 master + f32 m, v; bf16 gradient in, bf16 parameter out (16 B/param held)",
        "bytes": "read master 4, g 2, m 4, v 4; write master 4, m 4, v 4, p 2; + 2 write-allocate of p"},
    "deepspeed_cpu_adam_mixed": {
        "layout": "mixed", "bench": None, "held": 18, "rw": 34, "hw": 36,
        "state": "f32 parameter (master), gradient, m, v + the bf16 parameter copy (18 B/param held)",
        "bytes": "Adam: read p g m v 16, write p m v 12; bf16 copy: read p 4, write 2, + 2 write-allocate"},
    "megatrain_adamw_paper": {
        "layout": "paper", "bench": "paper", "held": 12, "rw": 22, "hw": 22,
        "state": "bf16 parameter and gradient + f32 m, v (12 B/param held)",
        "bytes": "read p 2, g 2, m 4, v 4; write p 2, m 4, v 4 (in place: no write-allocate)"},
    "deepspeed_cpu_adam": {
        "layout": "fp32 (the Adam pass of the mixed step alone)", "bench": None, "held": 16, "rw": 28, "hw": 28,
        "state": "f32 parameter, gradient, m, v (16 B/param held)",
        "bytes": "read p g m v 16, write p m v 12 (in place: no write-allocate)"},
}
LAYOUT_IMPLS = tuple(LAYOUTS)
TRIAD_HW_BYTES = 32  # a = b + s*c: read b, c; write a, and the write-allocate read of a
LLC_MULTIPLE = 8  # every working set is at least this many times the last-level cache


def llc_bytes():
    """The largest CPU cache in bytes (sysfs, else lscpu), None where neither says."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in os.listdir(base):
            try:
                with open(os.path.join(base, d, "size")) as f:
                    txt = f.read().strip()
            except OSError:
                continue
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(txt[-1:].upper(), 1)
            best = max(best, int(txt.rstrip("KkMmGg")) * mult)
    except (OSError, ValueError):
        pass
    if best:
        return best
    try:
        out = subprocess.run(["lscpu", "-B"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("L3 cache:"):
                return int(line.split(":")[1].split()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        pass
    return None



def default_n(layouts, llc):
    """Parameters per step: 64M; with --layouts, LLC_MULTIPLE times the last-level cache over the
    smallest state held (so every layout's working set is at least that), 128M where the cache is
    unknown; a multiple of 1024."""
    if not layouts:
        return 1 << 26
    smallest = min(L["held"] for L in LAYOUTS.values())
    n = max(1 << 20, -(-LLC_MULTIPLE * llc // smallest)) if llc else 1 << 27
    return -(-n // 1024) * 1024


def microbench(exe, n, threads, min_time, modes=("fp32",)):
    """One mt-microbench run of triad/<n> and adamw/<mode>/<n> for each mode: {"triad" or mode:
    bytes_per_second} (mt-microbench's convention: 24 B/element, AdamW reads + writes)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MT_MB_HOST_N=str(n))  # mb.h: mt_mb_host_n
    cmd = [exe, f"--benchmark_filter=^(triad|adamw/({'|'.join(modes)}))/{n}/", "--benchmark_format=json",
           f"--benchmark_min_time={min_time}"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"cpu_optimizers: {exe} failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
    out = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("error_occurred"):  # the adamw families check their last step against the reference
            raise SystemExit(f"cpu_optimizers: {b['name']}: {b.get('error_message')}")
        out["triad" if b["name"].startswith("triad") else b["name"].split("/")[1]] = float(b["bytes_per_second"])
    if set(out) != {"triad", *modes}:
        raise SystemExit(f"cpu_optimizers: mt-microbench gave {sorted(out)}, expected triad and adamw/"
                         f"{{{','.join(modes)}}} at n={n}")
    return out


class TorchStep:
    """One AdamW implementation over one fp32 parameter of n elements; rate() times steps.
    deepspeed_cpu_adam_mixed: DeepSpeedCPUAdam, then the bf16 copy of the updated parameter
    that ZeRO-3 makes; rate() then gives both (the Adam pass alone, and the whole step)."""

    def __init__(self, torch, impl, n):
        g = torch.Generator().manual_seed(0)
        self.torch = torch
        self.p = torch.nn.Parameter((torch.rand(n, generator=g) - 0.5) * 0.02)
        self.p.grad = (torch.rand(n, generator=g) - 0.5) * 0.002
        self.n = n
        self.bf16 = torch.empty(n, dtype=torch.bfloat16) if impl == "deepspeed_cpu_adam_mixed" else None
        if impl.startswith("deepspeed_cpu_adam"):
            from deepspeed.ops.adam import DeepSpeedCPUAdam
            self.opt = DeepSpeedCPUAdam([self.p], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, adamw_mode=True)
        else:
            kw = {"foreach": True} if impl == "torch_adamw_foreach" else {"fused": True}
            self.opt = torch.optim.AdamW([self.p], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, **kw)
        self.opt.step()  # first step: allocates the moments (and builds the op), not timed
        if self.bf16 is not None:
            self.bf16.copy_(self.p.detach())

    def rate(self, min_time):
        """params/s over as many whole steps as fill min_time (at least 2); with the bf16 copy,
        (params/s of the whole step, params/s of its Adam pass alone)."""
        steps, t_adam, t0 = 0, 0.0, time.perf_counter()
        while True:
            t = time.perf_counter()
            self.opt.step()
            t_adam += time.perf_counter() - t
            if self.bf16 is not None:
                self.bf16.copy_(self.p.detach())
            steps += 1
            dt = time.perf_counter() - t0
            if steps >= 2 and dt >= min_time:
                return (self.n * steps / dt, self.n * steps / t_adam) if self.bf16 is not None else self.n * steps / dt


def layout_rows(rounds, impls, n, threads, llc, repeats, env):
    """The --layouts rows from the rounds [{"triad": B/s at 24 B/element, "pps": {impl: params/s}}]:
    each implementation's params/s and GB/s at its hardware bytes, the triad's bound at 32 B/element,
    and (mixed) ours over DeepSpeed's."""
    triad_hw = [x["triad"] * TRIAD_HW_BYTES / TRIAD_BYTES_PER_ELEMENT for x in rounds]
    t_hw, t_stream = stats([t / 1e9 for t in triad_hw]), stats([x["triad"] / 1e9 for x in rounds])
    rows = []
    for impl in impls:
        L = LAYOUTS[impl]
        p = stats([x["pps"][impl] for x in rounds])
        frac = stats([x["pps"][impl] * L["hw"] / t for x, t in zip(rounds, triad_hw)])
        row = {"schema": SCHEMA, "impl": impl, "layout": L["layout"], "state": L["state"],
               "params_per_s": p["median"], "bytes_per_s": p["median"] * L["hw"],
               "bytes_per_param": L["hw"], "bytes_per_param_rw": L["rw"], "bytes_detail": L["bytes"],
               "bound_params_per_s": t_hw["median"] * 1e9 / L["hw"], "frac_of_bound": frac["median"],
               "frac_of_bound_range": [frac["min"], frac["max"]],
               "triad_gb_s": t_hw["median"], "triad_gb_s_range": [t_hw["min"], t_hw["max"]],
               "triad_stream_gb_s": t_stream["median"],
               "threads": threads, "n_params": n, "repeats": repeats,
               "params_per_s_range": [p["min"], p["max"]],
               "bytes_per_s_range": [p["min"] * L["hw"], p["max"] * L["hw"]],
               "working_set_bytes": n * L["held"], "triad_working_set_bytes": n * 24, "llc_bytes": llc,
               "n_over_llc": n * L["held"] / llc if llc else None,
               "bytes_convention": (f"what the hardware moves: reads, writes and write-allocate ({L['bytes']}); "
                                    f"the bound: triad over n doubles at {TRIAD_HW_BYTES} B/element (b, c read, "
                                    f"a written + allocated), /bytes_per_param"),
               "stat": "median over rounds, min and max beside it; frac_of_bound and ratio_to_deepspeed per round, "
                       "then the median",
               "env": env}
        peer = "deepspeed_cpu_adam_mixed" if impl == "megatrain_adamw_mixed" else None
        if peer and peer in impls:
            r = stats([x["pps"][impl] / x["pps"][peer] for x in rounds])
            row.update(ratio_to_deepspeed=r["median"], ratio_to_deepspeed_range=[r["min"], r["max"]])
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default=None,
                    help="parameters per step (default 64M: 1 GiB of fp32 AdamW state, far beyond cache; "
                    f"with --layouts: 'auto', {LLC_MULTIPLE}x the last-level cache over paper's 12 B/param)")
    ap.add_argument("--layouts", action="store_true",
                    help="ours and DeepSpeedCPUAdam in the mixed layout, ours paper beside, the memory bound for each")
    ap.add_argument("--no-peers", action="store_true", help="with --layouts: ours and the bound only (no torch)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds over all implementations (default 5)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every implementation")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds timed per implementation per round")
    ap.add_argument("--bin", default=os.environ.get("MT_BIN", os.path.join(ROOT, "build", "bin")))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "cpu_optimizers.jsonl"))
    a = ap.parse_args()
    llc = llc_bytes()
    try:
        a.n = default_n(a.layouts, llc) if a.n in (None, "auto") else int(a.n)
    except ValueError:
        a.n = 0
    if a.n < 1024 or a.repeats < 1 or a.threads < 1 or a.min_time <= 0 or (a.no_peers and not a.layouts):
        print("cpu_optimizers: --n >= 1024 (or auto), --repeats >= 1, --threads >= 1, --min-time > 0; "
              "--no-peers only with --layouts", file=sys.stderr)
        return 2
    exe = os.path.join(a.bin, "mt-microbench")
    try:  # before anything runs: --out is a file, none of what the run reads
        common.check_out(a.out, [exe])
    except common.PeerError as e:
        print(f"cpu_optimizers: {e}", file=sys.stderr)
        return 2
    if not os.access(exe, os.X_OK):
        common.skip("cpu_optimizers", f"{exe} not built (needs Google Benchmark; make, or --bin DIR)")
    os.environ["OMP_NUM_THREADS"] = str(a.threads)  # before torch loads its OpenMP runtime
    torch = deepspeed = None
    if not a.no_peers:
        try:
            import torch
        except ImportError as e:
            common.skip("cpu_optimizers", f"torch not importable ({e}); CI does not install it")
        try:
            import deepspeed
        except Exception as e:  # noqa: BLE001 - any import failure means: not here
            common.skip("cpu_optimizers", f"deepspeed not importable ({type(e).__name__}: {e})")
        torch.set_num_threads(a.threads)
    os.environ.setdefault("MT_BIN", a.bin)
    env = common.collect_env()

    common.log(f"cpu_optimizers: n={a.n}, {a.threads} threads, {a.repeats} rounds; building the optimizers "
               "(DeepSpeed JIT-compiles cpu_adam the first time, minutes)")
    if a.layouts and llc and a.n * min(L["held"] for L in LAYOUTS.values()) < LLC_MULTIPLE * llc:
        common.log(f"cpu_optimizers: note: n={a.n} holds less than {LLC_MULTIPLE}x the last-level cache "
                   f"({llc} B) in the paper layout: part of it may run from cache (--n auto sizes it)")
    if a.layouts:
        impls = tuple(i for i in LAYOUT_IMPLS if LAYOUTS[i]["bench"] or not a.no_peers)
        modes = tuple(LAYOUTS[i]["bench"] for i in impls if LAYOUTS[i]["bench"])
        torch_impls = ("deepspeed_cpu_adam_mixed",) if not a.no_peers else ()
    else:
        impls, modes, torch_impls = IMPLS, ("fp32",), IMPLS[1:]
    steppers = {}
    for impl in torch_impls:
        t0 = time.time()
        steppers[impl] = TorchStep(torch, impl, a.n)
        common.log(f"  {impl} ready ({time.time() - t0:.1f} s)")

    rounds = []
    load = [common.load_avg()]
    for r in range(a.repeats):
        mb = microbench(exe, a.n, a.threads, a.min_time, modes)
        if a.layouts:
            pps = {i: mb[LAYOUTS[i]["bench"]] / LAYOUTS[i]["rw"] for i in impls if LAYOUTS[i]["bench"]}
            if "deepspeed_cpu_adam_mixed" in steppers:
                pps["deepspeed_cpu_adam_mixed"], pps["deepspeed_cpu_adam"] = steppers["deepspeed_cpu_adam_mixed"].rate(
                    a.min_time)
        else:
            pps = {"megatrain_adamw": mb["fp32"] / BYTES_PER_PARAM}
            for impl, st in steppers.items():
                pps[impl] = st.rate(a.min_time)
        rounds.append({"triad": mb["triad"], "pps": pps})
        load.append(common.load_avg())
        common.log(f"  round {r + 1}/{a.repeats}: triad {mb['triad'] / 1e9:.2f} GB/s (24 B/element); "
                   + ", ".join(f"{k} {v / 1e6:.0f} M params/s" for k, v in pps.items()))

    env_extra = {"torch": torch.__version__ if torch else None, "deepspeed": deepspeed.__version__ if deepspeed else None,
                 "omp_num_threads": a.threads, "llc_bytes": llc,
                 "load_avg_1min": [x for x in load if x is not None],
                 "where": "measured on this machine by baselines/peers/cpu_optimizers.py"}
    if a.layouts:
        rows = layout_rows(rounds, impls, a.n, a.threads, llc, a.repeats, dict(env, **env_extra))
        for row in rows:
            common.log(f"  {row['impl']} ({row['layout']}): {row['params_per_s'] / 1e6:.0f} M params/s, "
                       f"{row['bytes_per_s'] / 1e9:.1f} GB/s at {row['bytes_per_param']} B/param, "
                       f"{100 * row['frac_of_bound']:.0f}% of the bound (triad {row['triad_gb_s']:.1f} GB/s at "
                       f"{TRIAD_HW_BYTES} B/element)" + (f"; ours/DeepSpeed {row['ratio_to_deepspeed']:.2f}x"
                                                          if "ratio_to_deepspeed" in row else ""))
    else:
        rows = fp32_rows(rounds, impls, a, dict(env, **env_extra))
    common.write_jsonl(a.out, rows)
    common.log(f"cpu_optimizers: wrote {a.out}")
    return 0


def fp32_rows(rounds, impls, a, env):
    """The rows of the default run: every implementation at fp32 AdamW's 28 B/param."""
    triad = stats([x["triad"] / 1e9 for x in rounds])
    rows = []
    for impl in impls:
        p = stats([x["pps"][impl] for x in rounds])
        b = {k: v * BYTES_PER_PARAM for k, v in p.items()}
        ratio = stats([x["pps"][impl] * BYTES_PER_PARAM / x["triad"] for x in rounds])
        rows.append({
            "schema": SCHEMA, "impl": impl,
            "params_per_s": p["median"], "bytes_per_s": b["median"],
            "triad_gb_s": triad["median"], "ratio_to_triad": ratio["median"],
            "threads": a.threads, "n_params": a.n, "repeats": a.repeats,
            "params_per_s_range": [p["min"], p["max"]], "bytes_per_s_range": [b["min"], b["max"]],
            "triad_gb_s_range": [triad["min"], triad["max"]], "ratio_to_triad_range": [ratio["min"], ratio["max"]],
            "bytes_per_param": BYTES_PER_PARAM,
            "bytes_convention": "28 B/param for every implementation: fp32 AdamW's least traffic, read p g m v + "
                                "write p m v, no write-allocate (harness/microbench/adamw.c); triad 24 B/element",
            "stat": "median over rounds, min and max beside it; ratio_to_triad is per round, then the median",
            "env": env,
        })
        common.log(f"  {impl}: {p['median'] / 1e6:.0f} M params/s, {b['median'] / 1e9:.1f} GB/s "
                   f"({BYTES_PER_PARAM} B/param), triad {triad['median']:.1f} GB/s")
    return rows


if __name__ == "__main__":
    sys.exit(main())
