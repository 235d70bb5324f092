#!/usr/bin/env python3
"""calibrate_profile.py: a hardware profile calibrated from mt-microbench.

usage: python3 -m harness.calibrate_profile BASE_PROFILE.json [MICROBENCH.json] [--attention ROWS.jsonl ...]
                                               [--cpu-optimizers ROWS.jsonl]
                                               [--env ENV.json] [--name NAME] [--out FILE] [--no-env]

Writes BASE_PROFILE (experiments/hardware/README.md, schema megatrain.hardware/1)
with every figure that MICROBENCH.json (Google Benchmark JSON from build/bin/
mt-microbench, harness/README.md) measured replaced by the measurement, and that
figure's `sources` entry set to
    "measured: mt-microbench <benchmark>, <utc of the run>, <gpu_name>"
(utc and gpu_name from the env block, the JSON string .context.mt_env). Figures it
did not measure keep their value and source. A figure measured in several
repetitions (--benchmark_repetitions) takes the median of the repetitions, or
Google Benchmark's `median` aggregate when only aggregates were reported; rows
with error_occurred are ignored.

figure                              from
link.{h2d,d2h}_gbps.{pinned,pageable}  copy/cuda/<mode>/<dir>/<N>, counter gbps (the median
                                       sample), at the largest N measured (1 GiB; < 256 MiB warns)
link.duplex_factor                  h2d_gbps of copy/cuda/pinned/bidir/N / gbps of
                                    copy/cuda/pinned/h2d/N, the same largest N: each direction's
                                    rate while the other copies too, as a fraction of its solo
                                    rate (the README's definition; the sim slows the overlapped
                                    part of a copy to factor x rate, plan charges W/(f*h2d));
                                    capped at 1.0
host.mem_gbps                       triad/<n> bytes_per_second (STREAM convention, 24 B/element);
                                    without a triad row, 2 x memcpy/<largest> bytes_per_second
                                    (memcpy's counter counts the bytes copied, the traffic is 2x)
host.grad_sumsq_gbps                grad_sumsq/bf16/<n> bytes_per_second at the largest n: the gradient
                                    drain's sum of squares (mt_grad_sumsq, every core), one read of
                                    the gradients (without it the sim prices that pass at host.mem_gbps)
host.adamw_gbps.<mode>              adamw/<mode>/<n> bytes_per_second, mode fp32|paper|mixed
host.adamw_params_per_s.<mode>      derived from the above: adamw_gbps*1e9/adamw_bytes_per_param
gpu.gemm_efficiency                 gemm/cuda/bf16/<N>/<IC>/<OC> tflops at the largest shape
                                    (2*N*IC*OC; ties: the mean over them) / gpu.peak_tflops.bf16,
                                    divided by the sim's size factor at that shape
                                    (MT_SIM_GEMM_HALF_MACS / MT_SIM_GEMM_FULL_DIM, sim.h; 0.998 at
                                    the 7B MLP shapes), so the sim prices that GEMM at the measured
                                    rate; capped at 1.0
gpu.gemm_bwd_efficiency             gemm_bwd/cuda/bf16/<N>/<IC>/<OC>/<flags> tflops: a layer's backward
                                    GEMMs (dinp + dW), every shape's time priced together through the
                                    sim's size factor (calibrate_gpu_rates.py says how)
gpu.kernel_gbps.<kernel>            kernel/cuda/bf16/<kernel>/<R>/<D> sim_gbps (the sim's byte count
                                    per second) at the largest R*D; rope_bwd derived from rope_fwd
gpu.attention_work_tflops.<kernel>  attention/cuda/bf16/<B>/<T>/<NH>/<NKV> tflops, the kernel in the
                                    row's label: points [B*NH*T^2, tflops] (a table by T was measured
                                    at one B x NH; the sim prefers this one)
host.cpu_cores, host.numa_nodes,    the env block (mt-env: topology, nvidia-smi), unless --no-env
host.mem_bytes, link.theory_gbps    (theory_gbps = pcie_gbps, only for a pcie link)

gpu.attention_tflops.<kernel>       --attention: JSON lines of the attention lab (`attention --sweep`:
                                    kernels native, cudnn) and of torch_reference.py (torch_sdpa,
                                    torch_sdpa_cudnn, torch_sdpa_flash): every row
                                    {"bench": "attention/<kernel>/fwd_bwd", "T": .., "tflops": ..}
                                    without an "error" becomes a point [T, tflops] (the median where
                                    one T has several rows); the rest of a file (comments, headers)
                                    is skipped. Sourced with the file, the shape, and the env block
                                    of MICROBENCH, else of --env (mt-env's JSON, for utc and gpu_name).
                                    The simulator and the planner price each implementation's
                                    attention at its table (model/hardware_profile.h).

host.adamw_gbps.<mode>              --cpu-optimizers: the megatrain_adamw_paper row of
                                    baselines/peers/cpu_optimizers.py (the engine's own AdamW pass,
                                    every core, at 4x the last-level cache), its bytes_per_s (median
                                    over rounds), for paper; mixed and fp32 assumed at the same GB/s
                                    (no row of theirs); params_per_s derived. It overrides adamw/*
                                    of MICROBENCH (whose N may fit the L3). Sourced with the file,
                                    n_params, threads, the row's utc, GPU and engine commit.

copy/cpu/*, gemm/cpu/*, gemm_bwd/cpu/*, kernel/cpu/* and attention/cpu/* are the cpu backend, not
the GPU: never used. A malformed row of the gemm_bwd, kernel or attention families (arguments, a
missing counter or label, a kernel the profile has no key for) is bad input.
The name is NAME, else the --out file's name without .json, else the base's.
A summary table (figure, old, new, change %) and warnings go to stderr; the profile goes
to --out (written atomically) or stdout. Bad input: one line on stderr, exit 1.
Python 3 standard library only (it runs on the GPU machine too).
"""
import argparse
import json
import math
import os
import re
import statistics
import sys

from . import calibrate_gpu_rates as gpu_rates
from .resultslib import safepath, schema

SCHEMA = "megatrain.hardware/1"
PROG = "calibrate_profile"
MODES = ("fp32", "paper", "mixed")
NUM_PATHS = (["gpu.peak_tflops.bf16", "gpu.peak_tflops.tf32", "gpu.peak_tflops.fp32", "gpu.gemm_efficiency",
              "gpu.hbm_gbps", "gpu.hbm_bytes", "link.theory_gbps", "link.h2d_gbps.pinned", "link.h2d_gbps.pageable",
              "link.d2h_gbps.pinned", "link.d2h_gbps.pageable", "link.duplex_factor", "host.mem_bytes",
              "host.mem_gbps", "host.cpu_cores", "host.numa_nodes"] +
             ["host.%s.%s" % (k, m) for k in ("adamw_bytes_per_param", "adamw_gbps", "adamw_params_per_s")
              for m in MODES])
STR_PATHS = ["name", "gpu.name", "link.kind"]
BIG_COPY = 256 << 20  # smaller copies understate the link (enqueue latency, no spin kernel)
# The sim's GEMM size factor (megatrain/backends/sim/sim.h); read from there when present.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIM_H = os.path.join(REPO, "megatrain", "backends", "sim", "sim.h")
SIM_DEFAULTS = {"MT_SIM_GEMM_HALF_MACS": 1073741824.0, "MT_SIM_GEMM_FULL_DIM": 64.0}
SUFFIX = re.compile(r"^(real_time|manual_time|process_time|iterations:\d+|repeats:\d+|threads:\d+|"
                    r"min_time:[^/]*|min_warmup_time:[^/]*)$")


class InputError(Exception):
    pass


def die(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr)
    sys.exit(1)


def warn(msg):
    print("%s: WARNING: %s" % (PROG, msg), file=sys.stderr)


def load_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return schema.loads(f.read())  # strictly: NaN or Infinity is no figure
    except OSError as e:
        raise InputError("%s: cannot read %s: %s" % (path, what, e.strerror or e))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError("%s: %s is not valid JSON: %s" % (path, what, e))


def get(obj, dotted):
    for k in dotted.split("."):
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def put(obj, dotted, value):
    keys = dotted.split(".")
    for k in keys[:-1]:
        obj = obj.setdefault(k, {})
    obj[keys[-1]] = value


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_profile(path, p):
    if not isinstance(p, dict):
        raise InputError("%s: expected a JSON object (a hardware profile)" % path)
    if p.get("schema") != SCHEMA:
        raise InputError("%s: schema: expected \"%s\", found %s" % (path, SCHEMA, json.dumps(p.get("schema"))))
    for k in STR_PATHS:
        v = get(p, k)
        if not isinstance(v, str) or not v:
            raise InputError("%s: %s: required string is missing" % (path, k))
    for k in NUM_PATHS:
        v = get(p, k)
        if v is None:
            raise InputError("%s: %s: required number is missing" % (path, k))
        if not is_num(v) or v <= 0:
            raise InputError("%s: %s: expected a positive number, found %s" % (path, k, json.dumps(v)))
    if not isinstance(p.get("sources"), dict):
        raise InputError("%s: sources: required object is missing" % path)


def check_microbench(path, mb):
    if not isinstance(mb, dict):
        raise InputError("%s: expected a JSON object (Google Benchmark output of mt-microbench)" % path)
    ctx = mb.get("context")
    if not isinstance(ctx, dict):
        raise InputError("%s: context: required object is missing" % path)
    env_s = ctx.get("mt_env")
    if not isinstance(env_s, str):
        raise InputError("%s: context.mt_env: required string is missing (not an mt-microbench run?)" % path)
    try:
        env = json.loads(env_s)
    except json.JSONDecodeError as e:
        raise InputError("%s: context.mt_env is not valid JSON: %s" % (path, e))
    if not isinstance(env, dict):
        raise InputError("%s: context.mt_env: expected a JSON object" % path)
    for k in ("utc", "gpu_name"):
        if k not in env:
            raise InputError("%s: context.mt_env.%s: required key is missing" % (path, k))
    if not isinstance(env["utc"], str) or not env["utc"]:
        raise InputError("%s: context.mt_env.utc: expected a non-empty string" % path)
    rows = mb.get("benchmarks")
    if not isinstance(rows, list):
        raise InputError("%s: benchmarks: required array is missing" % path)
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            raise InputError("%s: benchmarks[%d]: expected an object with a string name" % (path, i))
    return env, rows


def base_name(row):
    """copy/cuda/pinned/h2d/1073741824/iterations:1/manual_time -> copy/cuda/pinned/h2d/1073741824"""
    name = row.get("run_name") if isinstance(row.get("run_name"), str) else None
    if name is None:
        name = row["name"]
        if row.get("run_type") == "aggregate" and isinstance(row.get("aggregate_name"), str):
            suffix = "_" + row["aggregate_name"]
            if name.endswith(suffix):
                name = name[:-len(suffix)]
    parts = name.split("/")
    while parts and SUFFIX.match(parts[-1]):
        parts.pop()
    return "/".join(parts)


class Runs:
    """The rows of one microbench file, by base name; value() = median over repetitions."""

    def __init__(self, rows):
        self.iters, self.medians, self.errors, self.labels = {}, {}, [], {}
        for r in rows:
            b = base_name(r)
            if isinstance(r.get("label"), str) and not r.get("error_occurred"):
                self.labels.setdefault(b, r["label"])
            if r.get("error_occurred"):
                self.errors.append("%s (%s)" % (b, r.get("error_message", "error")))
            elif r.get("run_type") == "aggregate":
                if r.get("aggregate_name") == "median":
                    self.medians[b] = r
            else:
                self.iters.setdefault(b, []).append(r)

    def names(self):
        return set(self.iters) | set(self.medians)

    def value(self, name, counter):
        vals = [r[counter] for r in self.iters.get(name, []) if is_num(r.get(counter))]
        if vals:
            return statistics.median(vals)
        agg = self.medians.get(name)
        if agg is not None and is_num(agg.get(counter)):
            return agg[counter]
        return None

    def label(self, name):
        return self.labels.get(name)

    def reps(self, name):
        n = len(self.iters.get(name, []))
        return n if n else (1 if name in self.medians else 0)

    def family(self, prefix, nargs, counter):
        """{(int args...): value} for rows prefix/<a1>/.../<an> that have `counter`."""
        out = {}
        for name in self.names():
            if not name.startswith(prefix + "/"):
                continue
            args = name[len(prefix) + 1:].split("/")
            if len(args) != nargs or not all(a.isdigit() for a in args):
                continue
            v = self.value(name, counter)
            if v is not None and v > 0:
                out[tuple(int(a) for a in args)] = v
        return out


def sim_constants():
    consts, note = dict(SIM_DEFAULTS), None
    try:
        with open(SIM_H, encoding="utf-8") as f:
            text = f.read()
        for k in consts:
            m = re.search(r"#define\s+%s\s+([0-9.eE+-]+)" % k, text)
            if m:
                consts[k] = float(m.group(1))
            else:
                note = "%s not found in %s: using %g" % (k, SIM_H, consts[k])
    except OSError:
        note = "%s not readable: using the sim's GEMM constants as of writing" % SIM_H
    return consts, note


ATTN_BENCH = re.compile(r"^attention/([a-z0-9_]+)/fwd_bwd$")
ATTN_MAX_POINTS = 16  # model/hardware_profile.h MT_HW_ATTN_POINTS
ATTN_MAX_KERNELS = 8  # MT_HW_ATTN_KERNELS


def attention_tables(paths):
    """{kernel: ([[T, tflops], ...], "file, shape")} from the labs' JSON lines."""
    pts, shapes = {}, {}
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except OSError as e:
            raise InputError("%s: cannot read the attention rows: %s" % (path, e.strerror or e))
        for n, line in enumerate(lines, 1):
            if not line.lstrip().startswith("{"):
                continue  # the lab's '#' comments, a torch warning
            try:
                r = schema.loads(line)
            except ValueError as e:
                raise InputError("%s:%d: not a JSON row (%s)" % (path, n, e))
            m = ATTN_BENCH.match(r.get("bench", "")) if isinstance(r, dict) and isinstance(r.get("bench"), str) else None
            if not m or "error" in r:
                continue
            T, tf = r.get("T"), r.get("tflops")
            if not (is_num(T) and T >= 1 and float(T).is_integer() and is_num(tf) and tf > 0):
                raise InputError("%s: %s: expected a whole T and a positive tflops: %s" % (path, r["bench"], line.strip()))
            pts.setdefault(m.group(1), {}).setdefault(int(T), []).append(float(tf))
            shape = "B %s NH %s NKV %s HD %s" % tuple(r.get(k, "?") for k in ("B", "NH", "NKV", "HD"))
            shapes.setdefault(m.group(1), {}).setdefault(os.path.basename(path), set()).add(shape)
    out = {}
    for k in sorted(pts):
        table = [[T, round(statistics.median(v), 2)] for T, v in sorted(pts[k].items())]
        if len(table) > ATTN_MAX_POINTS:
            raise InputError("attention/%s: %d sequence lengths, the profile holds at most %d" %
                             (k, len(table), ATTN_MAX_POINTS))
        where = "; ".join("%s (%s)" % (f, ", ".join(sorted(s))) for f, s in sorted(shapes[k].items()))
        out[k] = (table, where)
    return out


def cpu_adam_row(path):
    """The megatrain_adamw_paper row of a cpu_optimizers.py file (schema megatrain.cpu_optimizers/1)."""
    try:
        with open(path) as f:
            rows = [schema.loads(l) for l in f if l.strip().startswith("{")]
    except (OSError, ValueError) as e:
        raise InputError("%s: %s" % (path, e))
    if not all(isinstance(r, dict) for r in rows):
        raise InputError("%s: a row is not a JSON object" % path)
    rows = [r for r in rows if r.get("impl") == "megatrain_adamw_paper" and not r.get("error")]
    if not rows:
        raise InputError("%s: no megatrain_adamw_paper row (baselines/peers/cpu_optimizers.py output?)" % path)
    r = rows[-1]
    for k in ("bytes_per_s", "params_per_s", "n_params", "threads", "bytes_per_param", "env"):
        if k not in r:
            raise InputError("%s: the megatrain_adamw_paper row has no %s" % (path, k))
    if r["bytes_per_param"] != 22:
        raise InputError("%s: megatrain_adamw_paper counts %s B/param, paper precision moves 22" %
                         (path, r["bytes_per_param"]))
    return r


def gbps_of(runs, name):
    v = runs.value(name, "gbps")
    if v is None:
        v = runs.value(name, "bytes_per_second")
        v = v / 1e9 if v is not None else None
    return v


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, str):  # a file a figure names (host.cpu_optimizers)
        return v
    if isinstance(v, int) or (abs(v) >= 1e6 and float(v).is_integer()):
        return "%.4g" % v if abs(v) >= 1e7 else "%d" % v
    return "%.4g" % v


class Calibration:
    """What the calibrators share: the inputs, the profile being written (new) beside the base
    as read (old) and its sources, and what changed, in the order set (the summary's rows)."""

    def __init__(self, a, prof, env, mb, rows, adam, attn):
        self.a, self.env, self.mb, self.adam, self.attn = a, env, mb, adam, attn
        self.runs = Runs(rows)
        self.utc = env["utc"]
        self.gpu = env.get("gpu_name") or "no GPU"
        self.old = json.loads(json.dumps(prof))
        self.new = prof
        self.src = prof["sources"]
        self.changed = []  # (figure, old, new)
        self.attn_changed = []  # (table, old points, new points)
        self.notes = []
        self.gemm, self.work = {}, {}  # what cal_gemm and cal_gpu_rates found, for what follows them
        self.figures = ()  # the figures of the calibrator running (CALIBRATORS)
        # The sim's GEMM size factor (sim.h) at (M, N, K): efficiencies are calibrated through it.
        self.consts, self.sim_note = sim_constants()

    def measured(self, what):
        return "measured: mt-microbench %s, %s, %s" % (what, self.utc, self.gpu)

    def set_fig(self, path, value, source):
        if not any(path == f or path.startswith(f + ".") for f in self.figures):  # the table says who sets what
            raise AssertionError("%s set by the calibrator of %s" % (path, ", ".join(self.figures)))
        put(self.new, path, value)
        self.src[path] = source
        self.changed.append((path, get(self.old, path), value))

    def sim_factor(self, k):
        w = float(k[0]) * k[1] * k[2]
        return w / (w + self.consts["MT_SIM_GEMM_HALF_MACS"]) * min(1.0, min(k) / self.consts["MT_SIM_GEMM_FULL_DIM"])


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="calibrate_profile.py",
                                 description="A hardware profile with the figures mt-microbench measured.")
    ap.add_argument("base", metavar="BASE_PROFILE.json")
    ap.add_argument("microbench", metavar="MICROBENCH.json", nargs="?")
    ap.add_argument("--attention", action="append", default=[], metavar="ROWS.jsonl",
                    help="attention lab / torch_reference.py JSON lines (repeatable)")
    ap.add_argument("--cpu-optimizers", metavar="ROWS.jsonl",
                    help="baselines/peers/cpu_optimizers.py rows: host AdamW from megatrain_adamw_paper")
    ap.add_argument("--env", metavar="ENV.json", help="mt-env's JSON (utc, gpu_name) when there is no MICROBENCH")
    ap.add_argument("--name", help="the profile's name (default: the --out file name, else the base's)")
    ap.add_argument("--out", help="write here (default: stdout)")
    ap.add_argument("--no-env", action="store_true",
                    help="keep host.cpu_cores/numa_nodes/mem_bytes and link.theory_gbps from the base")
    return ap.parse_args(argv)


def load_inputs(a):
    """The Calibration of the inputs, each checked; dies (exit 1) naming the bad one."""
    try:
        if a.out:  # never written over what it reads (the base, a link to it, any input)
            if os.path.isdir(a.out):
                raise InputError("--out %s is a folder, not a profile file" % a.out)
            safepath.refuse_own_input(a.out, [a.base, a.microbench, a.cpu_optimizers, a.env] + a.attention)
        prof = load_json(a.base, "the base profile")
        check_profile(a.base, prof)
        if not a.microbench and not a.attention and not a.cpu_optimizers:
            raise InputError("nothing to calibrate from: give MICROBENCH.json, --attention ROWS.jsonl and/or "
                             "--cpu-optimizers ROWS.jsonl")
        adam = cpu_adam_row(a.cpu_optimizers) if a.cpu_optimizers else None
        if a.microbench:
            mb = load_json(a.microbench, "the microbench output")
            env, rows = check_microbench(a.microbench, mb)
        else:
            mb, rows = {"context": {}}, []
            if not a.env and not adam:
                raise InputError("--attention without MICROBENCH.json: give --env ENV.json (mt-env's output) for "
                                 "the time and the GPU of the run")
            env = load_json(a.env, "the env block") if a.env else adam["env"]
            if not isinstance(env, dict) or not isinstance(env.get("utc"), str) or not env["utc"]:
                raise InputError("%s: utc: required string is missing (not mt-env's output?)" % a.env)
            a.no_env = True  # the env block sets no host figure without a microbench of this machine
        attn = attention_tables(a.attention)
        if a.attention and not attn:
            raise InputError("%s: no attention/<kernel>/fwd_bwd row with a time (the lab failed or was skipped?)" %
                             ", ".join(a.attention))
        if len(attn) > ATTN_MAX_KERNELS:
            raise InputError("%d attention implementations, the profile holds at most %d"
                             % (len(attn), ATTN_MAX_KERNELS))
    except (InputError, safepath.PathError) as e:
        die(str(e))
    return Calibration(a, prof, env, mb, rows, adam, attn)


def cal_link_copies(c):
    """link.{h2d,d2h}_gbps.{pinned,pageable}: copy/cuda/<mode>/<dir>/<bytes>, the largest copy."""
    for d in ("h2d", "d2h"):
        for mode in ("pinned", "pageable"):
            fam = c.runs.family("copy/cuda/%s/%s" % (mode, d), 1, "gbps")
            if not fam:
                fam = {k: v / 1e9 for k, v in c.runs.family("copy/cuda/%s/%s" % (mode, d), 1,
                                                             "bytes_per_second").items()}
            if not fam:
                continue
            n = max(fam)[0]
            name = "copy/cuda/%s/%s/%d" % (mode, d, n)
            if n < BIG_COPY:
                warn("%s: the largest copy measured is %d MiB (< 256 MiB): it understates the link" %
                     (name, n >> 20))
            reps = c.runs.reps(name)
            c.set_fig("link.%s_gbps.%s" % (d, mode), round(fam[(n,)], 2),
                      c.measured(name + (" (median of %d repetitions)" % reps if reps > 1 else "")))


def cal_link_duplex(c):
    """link.duplex_factor: both directions at once against h2d alone, at the largest size with both."""
    runs = c.runs
    bidir = runs.family("copy/cuda/pinned/bidir", 1, "h2d_gbps")
    solo = {k: gbps_of(runs, "copy/cuda/pinned/h2d/%d" % k[0]) for k in bidir}
    both = sorted(k for k in bidir if solo[k])
    if both:
        n = both[-1][0]
        bname, sname = "copy/cuda/pinned/bidir/%d" % n, "copy/cuda/pinned/h2d/%d" % n
        f = bidir[(n,)] / solo[(n,)]
        how = "%s h2d_gbps / %s gbps" % (bname, sname)
        if f > 1.0:
            how += " (%.3f, capped at 1)" % f
            f = 1.0
        c.set_fig("link.duplex_factor", round(f, 3), c.measured(how))
        d2h_b = runs.value(bname, "d2h_gbps")
        d2h_s = gbps_of(runs, "copy/cuda/pinned/d2h/%d" % n)
        agg = gbps_of(runs, bname)
        if d2h_b and d2h_s:
            c.notes.append("duplex, d2h side: %s d2h_gbps / d2h solo = %.3f (the profile uses the h2d side)" %
                           (bname, d2h_b / d2h_s))
        if agg and d2h_s:
            c.notes.append("duplex, aggregate: %s gbps / (h2d + d2h solo) = %.3f" % (bname, agg / (solo[(n,)] + d2h_s)))
    elif bidir:
        warn("copy/cuda/pinned/bidir measured without a copy/cuda/pinned/h2d run of the same size: "
             "link.duplex_factor kept")


def cal_host_mem(c):
    """host.mem_gbps: triad (STREAM convention), else memcpy x 2."""
    triad = c.runs.family("triad", 1, "bytes_per_second")
    memcpy = c.runs.family("memcpy", 1, "bytes_per_second")
    if triad:
        n = max(triad)[0]
        c.set_fig("host.mem_gbps", round(triad[(n,)] / 1e9, 2), c.measured("triad/%d bytes_per_second" % n))
    elif memcpy:
        n = max(memcpy)[0]
        c.set_fig("host.mem_gbps", round(2 * memcpy[(n,)] / 1e9, 2),
                  c.measured("memcpy/%d, 2 x bytes_per_second (read + write traffic; no triad row)" % n))
    if memcpy and triad:
        n = max(memcpy)[0]
        c.notes.append("memcpy/%d: %.2f GB/s copied = %.2f GB/s of traffic (triad: %.2f)" %
                       (n, memcpy[(n,)] / 1e9, 2 * memcpy[(n,)] / 1e9, get(c.new, "host.mem_gbps")))


def cal_grad_sumsq(c):
    """host.grad_sumsq_gbps: the gradient drain's sum of squares alone (the engine's pass; else the
    sim prices it at the triad's)."""
    sumsq = c.runs.family("grad_sumsq/bf16", 1, "bytes_per_second")
    if sumsq:
        n = max(sumsq)[0]
        c.set_fig("host.grad_sumsq_gbps", round(sumsq[(n,)] / 1e9, 2),
                  c.measured("grad_sumsq/bf16/%d bytes_per_second (one read of the gradients)" % n))


def cal_adamw_microbench(c):
    """host.adamw_gbps.<mode>, host.adamw_params_per_s.<mode>: mt-microbench adamw/<mode>."""
    for m in MODES:
        fam = c.runs.family("adamw/" + m, 1, "bytes_per_second")
        if not fam:
            continue
        n = max(fam)[0]
        name = "adamw/%s/%d" % (m, n)
        bpp = get(c.new, "host.adamw_bytes_per_param." + m)
        bpp_mb = c.runs.value(name, "bytes_per_param")
        if bpp_mb is not None and abs(bpp_mb - bpp) > 1e-9:
            warn("%s counts %g bytes/param, the profile %g: params/s derived with the profile's" % (name, bpp_mb, bpp))
        gbps = round(fam[(n,)] / 1e9, 2)
        c.set_fig("host.adamw_gbps." + m, gbps, c.measured(name + " bytes_per_second"))
        pps = c.runs.value(name, "params_per_s")
        c.set_fig("host.adamw_params_per_s." + m, int(round(gbps * 1e9 / bpp)),
                  c.measured(name + " params_per_s%s = adamw_gbps * 1e9 / adamw_bytes_per_param" %
                             (" %.4g" % pps if pps else "")))


def cal_adamw_engine(c):
    """host.adamw_gbps/params_per_s (every mode) and host.cpu_optimizers: the engine's own pass
    (cpu_optimizers.py), over the microbench's adamw/* above."""
    adam, a = c.adam, c.a
    if not adam:
        return
    e = adam["env"]
    gbps = round(adam["bytes_per_s"] / 1e9, 2)
    what = ("measured: baselines/peers/cpu_optimizers.py megatrain_adamw_paper, %s (n_params %d = %.1fx the "
            "last-level cache, %d threads, median of %d rounds: %.4g params/s x %d B/param), %s, %s host, "
            "engine at %s" % (os.path.basename(a.cpu_optimizers), adam["n_params"], adam.get("n_over_llc") or 0,
                              adam["threads"], adam.get("repeats") or 0, adam["params_per_s"],
                              adam["bytes_per_param"], e.get("utc"), e.get("gpu_name") or "no GPU",
                              e.get("git_sha")))
    for m in MODES:
        bpp = get(c.new, "host.adamw_bytes_per_param." + m)
        c.set_fig("host.adamw_gbps." + m, gbps, what if m == "paper" else
                  "assumed: host.adamw_gbps.paper's GB/s for %s's %g B/param (no %s row of the engine's pass); "
                  "paper: %s" % (m, bpp, m, what[len("measured: "):]))
        c.set_fig("host.adamw_params_per_s." + m, int(round(gbps * 1e9 / bpp, -7)),
                  "derived: host.adamw_gbps.%s * 1e9 / adamw_bytes_per_param.%s (rounded to 1e7)" % (m, m))
    # the peers' CPU optimizers measured beside it on this host price the peer models (engine/peer.c)
    c.set_fig("host.cpu_optimizers", os.path.relpath(os.path.abspath(a.cpu_optimizers), REPO),
              what.replace("megatrain_adamw_paper",
                           "every row (the peers' CPU optimizers beside megatrain_adamw_paper)"))


def cal_gemm(c):
    """gpu.gemm_efficiency: bf16 at the largest shape, against the dense peak through the sim's size factor."""
    gemm = c.gemm = c.runs.family("gemm/cuda/bf16", 3, "tflops")
    if not gemm:
        return
    peak = get(c.new, "gpu.peak_tflops.bf16")
    if c.sim_note:
        c.notes.append(c.sim_note)
    flops = {k: 2.0 * k[0] * k[1] * k[2] for k in gemm}
    top = max(flops.values())
    shapes = sorted(k for k in gemm if flops[k] == top)

    eff = statistics.mean(gemm[k] / (peak * c.sim_factor(k)) for k in shapes)
    names = " and ".join("gemm/cuda/bf16/%d/%d/%d" % k for k in shapes)
    tf = statistics.mean(gemm[k] for k in shapes)
    how = "%s: %.1f TFLOP/s%s / peak_tflops.bf16 %g / sim size factor %.4f" % (
        names, tf, " (mean)" if len(shapes) > 1 else "", peak, statistics.mean(c.sim_factor(k) for k in shapes))
    if eff > 1.0:
        how += " (%.3f, capped at 1)" % eff
        eff = 1.0
    c.set_fig("gpu.gemm_efficiency", round(eff, 4), c.measured(how))
    for k in sorted(gemm):
        c.notes.append("gemm/cuda/bf16/%d/%d/%d: %.1f TFLOP/s = %.3f of the bf16 peak"
                       % (k + (gemm[k], gemm[k] / peak)))
    f32 = c.runs.family("gemm/cuda/f32", 3, "tflops")
    for k in sorted(f32):
        c.notes.append("gemm/cuda/f32/%d/%d/%d: %.1f TFLOP/s = %.3f of the fp32 peak %g (not in the profile)" %
                       (k + (f32[k], f32[k] / get(c.new, "gpu.peak_tflops.fp32"), get(c.new, "gpu.peak_tflops.fp32"))))


def cal_gpu_rates(c):
    """gpu.gemm_bwd_efficiency and gpu.kernel_gbps.<kernel>: the optional measured GPU rates
    (calibrate_gpu_rates.py; attention by work is read here too, cal_attention files it); a
    malformed row of theirs is bad input."""
    peak = get(c.new, "gpu.peak_tflops.bf16")
    try:
        bwd = gpu_rates.gemm_bwd(c.runs, peak, c.sim_factor, c.notes)
        kern = gpu_rates.kernels(c.runs, c.notes)
        c.work = gpu_rates.attention_work(c.runs, c.notes)
    except gpu_rates.RowError as e:
        die("%s: %s" % (c.a.microbench, e))
    if bwd:
        if c.sim_note and not c.gemm:
            c.notes.append(c.sim_note)
        c.set_fig("gpu.gemm_bwd_efficiency", round(bwd[0], 4), c.measured(bwd[1]))
        fwd = get(c.new, "gpu.gemm_efficiency")
        c.notes.append("gpu.gemm_bwd_efficiency / gpu.gemm_efficiency = %.3f (backward GEMMs against forward ones)"
                       % (bwd[0] / fwd))
    for k, (gbps, name, base) in kern.items():
        if base:  # derived from another kernel's measurement (rope_bwd: rope_fwd's kernel)
            how = ("derived: gpu.kernel_gbps.%s, the same kernel (megatrain/backends/cuda/cuda_rope.cu rope<DIR>, "
                   "run in place both ways); %s: %s" % (base, base, c.measured(name + " sim_gbps")[len("measured: "):]))
        else:
            how = c.measured(name + " sim_gbps (the sim's bytes of the call per second)")
        c.set_fig("gpu.kernel_gbps." + k, round(gbps, 1), how)
        hbm = get(c.new, "gpu.hbm_gbps")
        if not base and gbps > hbm:
            warn("%s: %.0f GB/s in the sim's byte count is above gpu.hbm_gbps %g: the count exceeds the kernel's "
                 "traffic (or caches served it); the sim prices the count at the measured rate all the same"
                 % (name, gbps, hbm))


def cal_attention(c):
    """gpu.attention_work_tflops.<kernel> and gpu.attention_tflops.<kernel>: attention per
    implementation, merged into what the base measured before."""
    if c.work:
        tables = c.new["gpu"].setdefault("attention_work_tflops", {})
        for k, (table, names) in c.work.items():
            c.attn_changed.append(("gpu.attention_work_tflops." + k, tables.get(k), table))
            tables[k] = table
            c.src["gpu.attention_work_tflops." + k] = c.measured(
                "%s tflops (label %s; causal forward + backward at B*NH*T^2 = %s)"
                % (", ".join(names), k, ", ".join(str(p[0]) for p in table)))
        if len(tables) > ATTN_MAX_KERNELS:
            die("gpu.attention_work_tflops: %d implementations with the base's, the profile holds at most %d" %
                (len(tables), ATTN_MAX_KERNELS))
    if c.attn:
        tables = c.new["gpu"].setdefault("attention_tflops", {})
        for k, (table, where) in c.attn.items():
            c.attn_changed.append(("gpu.attention_tflops." + k, tables.get(k), table))
            tables[k] = table
            c.src["gpu.attention_tflops." + k] = (
                "measured: attention/%s/fwd_bwd, causal forward + backward, %s, %s, %s" % (k, where, c.utc, c.gpu))
        if len(tables) > ATTN_MAX_KERNELS:
            die("gpu.attention_tflops: %d implementations with the base's, the profile holds at most %d" %
                (len(tables), ATTN_MAX_KERNELS))


def cal_env(c):
    """host.cpu_cores, host.numa_nodes, host.mem_bytes and link.theory_gbps: the microbench's env
    block (unless --no-env)."""
    if c.a.no_env:
        return
    env = c.env

    def env_src(key, extra=""):
        return "measured: mt-microbench context.mt_env %s%s, %s, %s" % (key, extra, c.utc, c.gpu)
    for path, key, extra in (("host.cpu_cores", "cpu_cores", " (topology)"),
                             ("host.numa_nodes", "numa_nodes", " (topology)"),
                             ("host.mem_bytes", "host_mem_bytes", " (topology: total host memory)")):
        v = env.get(key)
        if is_num(v) and v > 0:
            c.set_fig(path, int(v), env_src(key, extra))
    v = env.get("pcie_gbps")
    if is_num(v) and v > 0 and c.new["link"]["kind"].startswith("pcie"):
        c.set_fig("link.theory_gbps", round(v, 1), env_src("pcie_gbps", " (nvidia-smi max link gen x width, "
                                                           "after encoding)"))


# The calibrators, one per figure of the profile (or family of figures set together) and the
# figures each sets (set_fig holds it to them), in the order they run: a later one may read what
# an earlier one set (cal_gpu_rates the GEMM rows; the engine's AdamW pass over the microbench's).
CALIBRATORS = (
    (("link.h2d_gbps", "link.d2h_gbps"), cal_link_copies),
    (("link.duplex_factor",), cal_link_duplex),
    (("host.mem_gbps",), cal_host_mem),
    (("host.grad_sumsq_gbps",), cal_grad_sumsq),
    (("host.adamw_gbps", "host.adamw_params_per_s"), cal_adamw_microbench),
    (("host.adamw_gbps", "host.adamw_params_per_s", "host.cpu_optimizers"), cal_adamw_engine),
    (("gpu.gemm_efficiency",), cal_gemm),
    (("gpu.gemm_bwd_efficiency", "gpu.kernel_gbps"), cal_gpu_rates),
    (("gpu.attention_work_tflops", "gpu.attention_tflops"), cal_attention),
    (("host.cpu_cores", "host.numa_nodes", "host.mem_bytes", "link.theory_gbps"), cal_env),
)


def drop_covered_sources(c):
    """A parent source ("host.adamw_gbps") that no longer covers any figure goes."""
    for k in list(c.src):
        leaves = [p for p in NUM_PATHS if p.startswith(k + ".")]
        if leaves and all(p in c.src for p in leaves):
            del c.src[k]


def describe(c):
    """The profile's name and description; returns the name. The description ends in what was
    calibrated when: "(calibrated: ...)" for the microbench, "(attention measured: ...)" for the
    labs; a new run replaces its own note, keeps the other."""
    a, new = c.a, c.new
    name = a.name or (os.path.basename(a.out)[:-5] if a.out and a.out.endswith(".json") else None) or new["name"]
    new["name"] = name
    desc = new.get("description") or ""
    notes_in = dict(re.findall(r"\((calibrated|attention measured): ([^)]*)\)", desc))
    desc = re.sub(r"(\s*\((calibrated|attention measured): [^)]*\))+$", "", desc)
    if a.microbench:
        notes_in["calibrated"] = "mt-microbench %s, %s" % (c.utc, c.gpu)
    if c.attn:
        notes_in["attention measured"] = "%s, %s" % (c.utc, c.gpu)
    for k in ("calibrated", "attention measured"):
        if k in notes_in:
            desc += " (%s: %s)" % (k, notes_in[k])
    new["description"] = desc
    return name


def warn_profile(c):
    """Warnings about what the profile now says."""
    env, old, new, changed = c.env, c.old, c.new, c.changed
    pg = (get(old, "gpu.name") or "").lower()
    if env.get("gpu_name") and env["gpu_name"].lower() not in pg:
        warn("the microbench ran on '%s' but the base profile is for '%s': peaks (and gemm_efficiency against them) "
             "may be the wrong variant's" % (env["gpu_name"], get(old, "gpu.name")))
    if not env.get("gpu_name"):
        if any(ch[0].startswith(("link.", "gpu.")) for ch in changed):
            warn("GPU figures measured but the env block names no GPU")
        else:
            warn("no GPU in this run: only host figures were calibrated, and they describe %s (%s cores), "
                 "not necessarily the host of '%s'" % (env.get("cpu_model") or "this host", env.get("cpu_cores"),
                                                      get(old, "name")))
    for d in ("h2d", "d2h"):
        l = new["link"]
        if l[d + "_gbps"]["pageable"] > l[d + "_gbps"]["pinned"]:
            warn("link.%s_gbps: pageable %g > pinned %g" % (d, l[d + "_gbps"]["pageable"], l[d + "_gbps"]["pinned"]))
        if l[d + "_gbps"]["pinned"] > l["theory_gbps"]:
            warn("link.%s_gbps.pinned %g > link.theory_gbps %g" % (d, l[d + "_gbps"]["pinned"], l["theory_gbps"]))
    measured_link = any(ch[0].startswith("link.") and ch[0] != "link.theory_gbps" for ch in changed)
    if not measured_link and "copy/cuda/*" in str(c.mb["context"].get("skipped", "")):
        c.notes.append("no copy/cuda rows (%s): link figures kept" % c.mb["context"]["skipped"])
    for e in c.runs.errors:
        warn("ignored, error_occurred: %s" % e)


def summary(c, name):
    """The summary table, on stderr: every figure changed, old and new."""
    changed, attn_changed = c.changed, c.attn_changed
    w = max([len(ch[0]) for ch in changed] + [len(k) for k, _, _ in attn_changed] + [6])
    lines = ["%s: %s <- %s (%s, %s)" % (PROG, name, os.path.basename(c.a.base), c.utc, c.gpu),
             "%-*s  %14s  %14s  %8s" % (w, "figure", "old", "new", "change")]
    for path, o, n in changed:
        ch = "%+.1f%%" % (100.0 * (n - o) / o) if is_num(o) and o else "-"
        lines.append("%-*s  %14s  %14s  %8s" % (w, path, fmt(o), fmt(n), ch))
    for k, o, n in attn_changed:
        def span(t):
            return "%d pts, %.3g-%.3g" % (len(t), min(p[1] for p in t), max(p[1] for p in t)) if t else "-"
        keys = ("W %.3g-%.3g" if "work" in k else "T %d-%d") % (n[0][0], n[-1][0])  # B*NH*T^2, or T
        lines.append("%-*s  %14s  %14s  %8s" % (w, k, span(o), span(n), keys))
    kept = [p for p in NUM_PATHS if p not in {ch[0] for ch in changed}]
    lines.append("kept from the base (not measured): %s" % (", ".join(kept) if kept else "none"))
    for n in c.notes:
        lines.append("note: " + n)
    print("\n".join(lines), file=sys.stderr)


def write(c):
    text = json.dumps(c.new, indent=2, ensure_ascii=False) + "\n"
    if c.a.out:
        try:
            safepath.write_bytes(c.a.out, text.encode("utf-8"))
        except (OSError, safepath.PathError) as e:  # a folder, a place that cannot be written
            die("%s: cannot write: %s" % (c.a.out, e.strerror or e))
        print("%s: wrote %s" % (PROG, c.a.out), file=sys.stderr)
    else:
        sys.stdout.write(text)


def main(argv):
    c = load_inputs(parse_args(argv))
    for figures, calibrate in CALIBRATORS:
        c.figures = figures
        calibrate(c)
    a = c.a
    if a.microbench and not c.changed and not c.work:
        die("%s: no benchmark in it measures a profile figure (copy/cuda, gemm/cuda/bf16, gemm_bwd/cuda/bf16, "
            "kernel/cuda/bf16, attention/cuda/bf16, triad, memcpy, adamw, grad_sumsq/bf16)" % a.microbench)
    drop_covered_sources(c)
    name = describe(c)
    warn_profile(c)
    summary(c, name)
    write(c)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
