#!/usr/bin/env python3
"""cpu_optimizers.py: the peers' CPU optimizers beside ours and the STREAM triad, in one run.

    python3 baselines/peers/cpu_optimizers.py [--n 67108864] [--repeats 5] [--threads T]
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

--layouts (the GPU campaign's cpu_adam step, issue 31): only ours and DeepSpeed's, each in the
state layout it trains with: ours in paper precision (mt-microbench adamw/paper: bf16 parameter
and gradient, fp32 m, v; 22 B/param moved) and DeepSpeedCPUAdam in its fp32 layout (fp32
parameter, gradient, m, v; 28 B/param), over the same element count, by default sized
LLC_MULTIPLE times the host's last-level cache for the smaller state (ours, 12 B/param), the
cache read from sysfs (lscpu as fallback), so that both run from memory. Each row then says its
own bytes per parameter, and ours has ratio_to_deepspeed (params/s over DeepSpeed's, per round,
median).

Writes one row per implementation to --out (rewritten whole). Exit 77 (skipped) when torch
or deepspeed cannot be imported or mt-microbench is missing: CI does not install them; the
committed results/cpu_optimizers.jsonl was measured by hand (baselines/peers/README.md).
Progress on stderr; the rows also on stdout, one JSON object per line.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import common  # noqa: E402  (log, skip, the load average, the env block: stdlib only)
from resultslib import spread as stats  # noqa: E402  (median, min, max)
SCHEMA = "megatrain.cpu_optimizers/1"
BYTES_PER_PARAM = 28  # fp32 AdamW: read p g m v, write p m v (harness/microbench/adamw.c)
TRIAD_BYTES_PER_ELEMENT = 24
LR, BETAS, EPS, WD = 3e-4, (0.9, 0.95), 1e-8, 0.1
IMPLS = ("megatrain_adamw", "deepspeed_cpu_adam", "torch_adamw_foreach", "torch_adamw_fused")
# --layouts: each optimizer in the layout it trains with (bytes moved per parameter, state held)
LAYOUT_IMPLS = ("megatrain_adamw_paper", "deepspeed_cpu_adam")
LAYOUT_BYTES = {"megatrain_adamw_paper": 22, "deepspeed_cpu_adam": 28}
LAYOUT_STATE = {"megatrain_adamw_paper": "bf16 param + bf16 grad + fp32 m, v (12 B/param held)",
                "deepspeed_cpu_adam": "fp32 param + fp32 grad + fp32 m, v (16 B/param held)"}
LLC_MULTIPLE = 4  # the working set is this many times the last-level cache: a memory-speed rate


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



def microbench(exe, n, threads, min_time, mode="fp32"):
    """One mt-microbench run of triad/<n> and adamw/<mode>/<n>: {name: bytes_per_second}."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MT_MB_HOST_N=str(n))  # mb.h: mt_mb_host_n
    cmd = [exe, f"--benchmark_filter=^(triad|adamw/{mode})/{n}/", "--benchmark_format=json",
           f"--benchmark_min_time={min_time}"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"cpu_optimizers: {exe} failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
    out = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("error_occurred"):
            raise SystemExit(f"cpu_optimizers: {b['name']}: {b.get('error_message')}")
        out[b["name"].split("/")[0] if b["name"].startswith("triad") else "adamw"] = float(b["bytes_per_second"])
    if set(out) != {"triad", "adamw"}:
        raise SystemExit(f"cpu_optimizers: mt-microbench gave {sorted(out)}, expected triad and adamw/{mode} at n={n}")
    return out


class TorchStep:
    """One AdamW implementation over one fp32 parameter of n elements; rate() times steps."""

    def __init__(self, torch, impl, n):
        g = torch.Generator().manual_seed(0)
        self.torch = torch
        self.p = torch.nn.Parameter((torch.rand(n, generator=g) - 0.5) * 0.02)
        self.p.grad = (torch.rand(n, generator=g) - 0.5) * 0.002
        self.n = n
        if impl == "deepspeed_cpu_adam":
            from deepspeed.ops.adam import DeepSpeedCPUAdam
            self.opt = DeepSpeedCPUAdam([self.p], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, adamw_mode=True)
        else:
            kw = {"foreach": True} if impl == "torch_adamw_foreach" else {"fused": True}
            self.opt = torch.optim.AdamW([self.p], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD, **kw)
        self.opt.step()  # first step: allocates the moments (and builds the op), not timed

    def rate(self, min_time):
        """params/s over as many whole steps as fill min_time (at least 2)."""
        steps, t0 = 0, time.perf_counter()
        while True:
            self.opt.step()
            steps += 1
            dt = time.perf_counter() - t0
            if steps >= 2 and dt >= min_time:
                return self.n * steps / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default=None,
                    help="parameters per step (default 64M: 1 GiB of fp32 AdamW state, far beyond cache; "
                    f"with --layouts: 'auto', {LLC_MULTIPLE}x the last-level cache over ours' 12 B/param)")
    ap.add_argument("--layouts", action="store_true",
                    help="ours (paper layout) against DeepSpeedCPUAdam (fp32 layout) only, each in its own layout")
    ap.add_argument("--repeats", type=int, default=5, help="rounds over all implementations (default 5)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every implementation")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds timed per implementation per round")
    ap.add_argument("--bin", default=os.environ.get("MT_BIN", os.path.join(ROOT, "build", "bin")))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "cpu_optimizers.jsonl"))
    a = ap.parse_args()
    llc = llc_bytes()
    if a.n in (None, "auto"):
        a.n = (max(1 << 20, -(-LLC_MULTIPLE * llc // 12)) if llc else 1 << 27) if a.layouts else 1 << 26
        a.n = -(-a.n // 1024) * 1024
    else:
        a.n = int(a.n)
    if a.n < 1024 or a.repeats < 1 or a.threads < 1 or a.min_time <= 0:
        print("cpu_optimizers: --n >= 1024, --repeats >= 1, --threads >= 1, --min-time > 0", file=sys.stderr)
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
    impls = LAYOUT_IMPLS if a.layouts else IMPLS
    bpp = LAYOUT_BYTES if a.layouts else {i: BYTES_PER_PARAM for i in IMPLS}
    ours = impls[0]
    steppers = {}
    for impl in impls[1:]:
        t0 = time.time()
        steppers[impl] = TorchStep(torch, impl, a.n)
        common.log(f"  {impl} ready ({time.time() - t0:.1f} s)")

    rounds = []
    load = [common.load_avg()]
    for r in range(a.repeats):
        mb = microbench(exe, a.n, a.threads, a.min_time, "paper" if a.layouts else "fp32")
        pps = {ours: mb["adamw"] / bpp[ours]}
        for impl, s in steppers.items():
            pps[impl] = s.rate(a.min_time)
        rounds.append({"triad": mb["triad"], "pps": pps})
        load.append(common.load_avg())
        common.log(f"  round {r + 1}/{a.repeats}: triad {mb['triad'] / 1e9:.2f} GB/s; "
            + ", ".join(f"{k} {v / 1e6:.0f} M params/s" for k, v in pps.items()))

    env_extra = {"torch": torch.__version__, "deepspeed": deepspeed.__version__, "omp_num_threads": a.threads,
                 "llc_bytes": llc,
                 "load_avg_1min": [x for x in load if x is not None],
                 "where": "measured on this machine by baselines/peers/cpu_optimizers.py"}
    triad = stats([x["triad"] / 1e9 for x in rounds])
    rows = []
    for impl in impls:
        p = stats([x["pps"][impl] for x in rounds])
        b = {k: v * bpp[impl] for k, v in p.items()}
        ratio = stats([x["pps"][impl] * bpp[impl] / x["triad"] for x in rounds])
        extra = {}
        if a.layouts:
            extra = {"layout": LAYOUT_STATE[impl], "llc_bytes": llc, "n_over_llc": a.n * 12 / llc if llc else None}
            if impl == ours:
                r = stats([x["pps"][ours] / x["pps"]["deepspeed_cpu_adam"] for x in rounds])
                extra.update(ratio_to_deepspeed=r["median"], ratio_to_deepspeed_range=[r["min"], r["max"]])
        rows.append(dict(extra, **{
            "schema": SCHEMA, "impl": impl,
            "params_per_s": p["median"], "bytes_per_s": b["median"],
            "triad_gb_s": triad["median"], "ratio_to_triad": ratio["median"],
            "threads": a.threads, "n_params": a.n, "repeats": a.repeats,
            "params_per_s_range": [p["min"], p["max"]], "bytes_per_s_range": [b["min"], b["max"]],
            "triad_gb_s_range": [triad["min"], triad["max"]], "ratio_to_triad_range": [ratio["min"], ratio["max"]],
            "bytes_per_param": bpp[impl],
            "bytes_convention": ("each in its own layout: read p g m v + write p m v, no write-allocate (ours paper "
                                 "22 B, DeepSpeed fp32 28 B; harness/microbench/adamw.c); triad 24 B/element"
                                 if a.layouts else
                                 "28 B/param for every implementation: fp32 AdamW's least traffic, read p g m v + "
                                 "write p m v, no write-allocate (harness/microbench/adamw.c); triad 24 B/element"),
            "stat": "median over rounds, min and max beside it; ratio_to_triad is per round, then the median",
            "env": dict(env, **env_extra),
        }))
        common.log(f"  {impl}: {p['median'] / 1e6:.0f} M params/s, {b['median'] / 1e9:.1f} GB/s ({bpp[impl]} B/param), "
                   f"triad {triad['median']:.1f} GB/s" + (f"; ours/DeepSpeed {extra['ratio_to_deepspeed']:.2f}x"
                                                          if "ratio_to_deepspeed" in extra else ""))
    common.write_jsonl(a.out, rows)
    common.log(f"cpu_optimizers: wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
