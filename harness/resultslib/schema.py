"""The one check of a results row (docs/DESIGN.md#results, results/README.md), used by
every reader of rows when it loads them, so that a bad row stops the reader with its
file and line instead of reaching a verdict or a traceback.

JSON is parsed strictly: NaN, Infinity and numbers that overflow to infinity are not
JSON figures, and a key given twice is refused. A row is an object with the schema's
keys and their types; a figure is a finite number; step_ms is null or
{median, min, max}, all positive, with min <= median <= max (an extrapolated row also
carries its err_frac); a `trace` is a relative path under traces/ and `experiment` a plain name
(both name files: safepath).

Two shapes: "results" (a results/*.jsonl row: every key and env key) and "baseline"
(what ci/check_regression.sh compares: results/baselines/*.jsonl keep fewer keys, a
step_ms may be a plain median or {median, noise}, and only its figures are checked, not
the order of min, median and max).
"""
import json
import math

from . import safepath

# A writer also checks the row it has just made (made_row_problems): its throughput is its
# step's tokens over its step time.
RESULTS_SCHEMA = "megatrain.results/1"
# The keys docs/DESIGN.md#results fixes for every results row, in the order rows are written.
RESULT_KEYS = ("schema", "experiment", "system", "mode", "model", "params", "layers_run",
               "layers_model", "batch", "seq_len", "precision", "step_ms", "tokens_per_s",
               "tflops", "mfu", "gpu_busy_frac", "h2d_gbps", "peak_gpu_bytes",
               "peak_host_bytes", "env")
ENV_KEYS = ("git_sha", "git_dirty", "gpu_name", "gpu_mem_bytes", "driver", "cuda",
            "host_mem_bytes", "cpu_model", "cpu_cores", "numa_nodes", "gpu_numa_node",
            "pcie_gbps", "hardware_profile", "utc")
MODES = ("measured", "extrapolated", "projected")
SHAPES = {"results": (RESULT_KEYS, ENV_KEYS),
          # baselines.py's KEEP: the checker's keys (no mfu, no gpu_busy_frac), env trimmed
          "baseline": (tuple(k for k in RESULT_KEYS if k not in ("mfu", "gpu_busy_frac")), ())}

STR = ("schema", "experiment", "system", "mode", "model")
STR_OR_NULL = ("precision", "variant", "hardware", "backend", "config_key", "gpu_busy_source", "note")
COUNTS = ("layers_run", "layers_model", "batch", "seq_len")  # whole numbers >= 0, or null
FIGURES = ("params", "tokens_per_s", "tflops", "mfu", "gpu_busy_frac", "h2d_gbps", "peak_gpu_bytes",
           "peak_host_bytes", "tokens", "days_per_billion_tokens", "mfu_peak_tflops", "step_ms_last",
           "wall_s", "loss_first", "loss_last", "setup_s", "startup_s", "optimizer_ms", "fwd_ms", "bwd_ms")
NONNEG = ("params", "tokens_per_s", "tflops", "mfu", "gpu_busy_frac", "h2d_gbps", "peak_gpu_bytes",
          "peak_host_bytes", "tokens", "days_per_billion_tokens", "mfu_peak_tflops", "step_ms_last", "wall_s")
OBJ_OR_NULL = ("sweep", "config", "plan", "fit", "batch_auto", "ranks", "peer", "setup", "cost_sources")
# The keys readers take from a row's objects, with their types when set (null allowed): a
# list or an object where a name or a number belongs would be a traceback in a reader.
_N, _C, _S, _L, _D = "number", "count", "string", "list", "object"
_H = "count, \"none\""  # a depth, or "none": an extrapolation over two depths (sweeps.NO_HOLDOUT)
NESTED = {
    "sweep": {"file": _S, "hardware_override": _S},
    "config": {"model": _S, "cli": _S, "peer": _S, "grad_accum": _C, "host_mem_gb": _N, "layers": _C,
               "layers_holdout": _H, "steps": _C, "warmup": _C, "args": _L, "layers_fit": _L, "overrides": _D},
    "ranks": {"gpus": _C, "hosts": _C, "batch_per_gpu": _C, "scaling_efficiency": _N, "one_gpu_tokens_per_s": _N,
              "tflops_per_gpu": _N, "host0_bytes": _N, "host_bytes_per_host": _N, "bound": _S},
    "batch_auto": {"batch": _C, "plan_batch": _C, "args": _L, "why": _S, "plan_recompute": _S},
    "fit": {"err_frac": _N, "noise_frac": _N, "per_layer_ms": _N, "intercept_ms": _N, "round_spread_frac": _N,
            "rounds": _C, "check": _D, "holdout": _D, "err_method": _S, "bar_too_wide": _S, "depths": _L,
            "step_ms": _L},
}
_IS = {_N: lambda v: is_num(v), _C: lambda v: is_num(v) and v >= 0 and v == int(v),
       _H: lambda v: v == "none" or (is_num(v) and v >= 0 and v == int(v)),
       _S: lambda v: isinstance(v, str), _L: lambda v: isinstance(v, list), _D: lambda v: isinstance(v, dict)}
ENV_STR = ("git_sha", "gpu_name", "driver", "cuda", "cpu_model", "hardware_profile", "utc")
ENV_NUM = ("gpu_mem_bytes", "host_mem_bytes", "cpu_cores", "numa_nodes", "gpu_numa_node", "pcie_gbps")


class RowsError(ValueError):
    """A file of rows that cannot be read: one line naming the file and the line."""


# ---------------------------------------------------------------- strict JSON
def _no_constant(s):
    raise ValueError(f"{s} is not a JSON number")


def _finite_float(s):
    v = float(s)
    if not math.isfinite(v):
        raise ValueError(f"{s} is out of range (not a finite number)")
    return v


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"key {k!r} given twice")
        d[k] = v
    return d


def loads(text):
    """json.loads, strictly: NaN/Infinity, numbers overflowing to infinity and repeated
    keys raise ValueError."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float,
                      object_pairs_hook=_no_duplicates)


def load_json(path, kind=dict):
    """A JSON file read strictly (loads; UTF-8), its top level of type `kind` (dict, list, or
    None for any): RowsError "PATH: why" otherwise, an unreadable file included."""
    try:
        with open(path, "rb") as f:
            v = loads(f.read().decode("utf-8"))
    except OSError as e:
        raise RowsError(f"{path}: cannot read ({e.strerror})")
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise RowsError(f"{path}: not strict JSON ({e})")
    if kind is not None and not isinstance(v, kind):
        raise RowsError(f"{path}: a JSON {type(v).__name__}, not {'an object' if kind is dict else 'a list'}")
    return v


# ---------------------------------------------------------------- the row check
def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fmt(v):
    return f"{v!r}" if not isinstance(v, str) else repr(v[:40])


def step_ms_problems(s, mode="measured", shape="results"):
    """Problems of a step_ms value (null, or {median, min, max} finite with min <= median <= max)."""
    if s is None:
        return []
    if shape == "baseline" and is_num(s):  # check_regression's plain median
        return [] if s > 0 else [f"step_ms {_fmt(s)} is not a positive number"]
    if not isinstance(s, dict):
        return [f"step_ms is {type(s).__name__} {_fmt(s)}, not {{median, min, max}} or null"]
    p = []
    need = ("median",) if shape == "baseline" else ("median", "min", "max")
    for k in need:
        if k not in s:
            p.append(f"step_ms lacks {k}")
    for k in ("median", "min", "max", "n", "err_frac", "noise"):
        if k in s and not (is_num(s[k]) and s[k] >= 0):
            p.append(f"step_ms.{k} is {_fmt(s[k])}, not a finite number >= 0")
    if p:
        return p
    for k in ("median", "min", "max"):  # a step of no time (or a min of 0) is no measurement
        if k in s and s[k] <= 0:
            p.append(f"step_ms.{k} {s[k]} is not positive")
    if ("min" in s) != ("max" in s):
        p.append("step_ms has only one of min and max")
    # (the checker compares medians and takes half the range as noise: a baseline-shaped row
    # made by moving a median alone, as its tests do, is still compared)
    elif "min" in s and shape == "results" and not s["min"] <= s["median"] <= s["max"]:
        p.append(f"step_ms min {s['min']:.6g} <= median {s['median']:.6g} <= max {s['max']:.6g} does not hold")
    if mode == "extrapolated" and shape == "results" and "err_frac" not in s:
        p.append("an extrapolated row without step_ms.err_frac (its held-out error)")
    return p


def row_problems(r, shape="results"):
    """What is wrong with one row as the schema has it ([]: a good row)."""
    if not isinstance(r, dict):
        return [f"a row is a JSON object, not {type(r).__name__}"]
    keys, env_keys = SHAPES[shape]
    p = []
    missing = [k for k in keys if k not in r]
    if missing:
        p.append("missing key(s) " + ", ".join(missing))
    if r.get("schema", RESULTS_SCHEMA) != RESULTS_SCHEMA:
        p.append(f"schema is {_fmt(r.get('schema'))}, not {RESULTS_SCHEMA}")
    for k in STR:
        if k in r and not (isinstance(r[k], str) and r[k]):
            p.append(f"{k} is {_fmt(r[k])}, not a string")
    if "mode" in r and isinstance(r["mode"], str) and r["mode"] not in MODES:
        p.append(f"mode {r['mode']!r} is not one of {', '.join(MODES)}")
    if isinstance(r.get("experiment"), str) and r["experiment"]:
        try:
            safepath.name(r["experiment"], "experiment")
        except safepath.PathError as e:
            p.append(str(e))
    for k in STR_OR_NULL:
        if r.get(k) is not None and not isinstance(r[k], str):
            p.append(f"{k} is {_fmt(r[k])}, not a string or null")
    for k in COUNTS:
        v = r.get(k)
        if v is not None and not (is_num(v) and v >= 0 and v == int(v)):
            p.append(f"{k} is {_fmt(v)}, not a whole number >= 0 or null")
    for k in FIGURES:
        v = r.get(k)
        if v is not None and not (is_num(v) and (v >= 0 or k not in NONNEG)):
            p.append(f"{k} is {_fmt(v)}, not a finite number{' >= 0' if k in NONNEG else ''} or null")
    for k in OBJ_OR_NULL:
        if r.get(k) is not None and not isinstance(r[k], dict):
            p.append(f"{k} is {_fmt(r[k])}, not an object or null")
    for k, fields in NESTED.items():
        o = r.get(k)
        for f, want in fields.items() if isinstance(o, dict) else ():
            if o.get(f) is not None and not _IS[want](o[f]):
                p.append(f"{k}.{f} is {_fmt(o[f])}, not a{'n' if want == _D else ''} {want} or null")
    if "fits" in r and r["fits"] is not None and not isinstance(r["fits"], bool):
        p.append(f"fits is {_fmt(r['fits'])}, not true, false or null")
    if "error" in r and not isinstance(r["error"], str):
        p.append(f"error is {_fmt(r['error'])}, not a string")
    for k, n in (("gpu_busy_range", 2), ("host_load", 2), ("step_ms_all", None)):
        v = r.get(k)
        if v is not None and not (isinstance(v, list) and (n is None or len(v) == n)
                                  and all(x is None or is_num(x) for x in v)):
            p.append(f"{k} is {_fmt(v)}, not a list of {n or 'any number of'} finite numbers")
    if r.get("trace") is not None:
        try:
            safepath.relative(r["trace"], "trace")
            if not r["trace"].startswith("traces/"):
                raise safepath.PathError(f"trace {r['trace']!r} is not under traces/")
        except safepath.PathError as e:
            p.append(str(e))
    p += step_ms_problems(r.get("step_ms"), r.get("mode"), shape)
    env = r.get("env")
    if "env" in r:
        if not isinstance(env, dict):
            p.append(f"env is {_fmt(env)}, not an object")
        else:
            lack = [k for k in env_keys if k not in env]
            if lack:
                p.append("env lacks " + ", ".join(lack))
            for k in ENV_STR:
                if env.get(k) is not None and not isinstance(env[k], str):
                    p.append(f"env.{k} is {_fmt(env[k])}, not a string or null")
            for k in ENV_NUM:
                if env.get(k) is not None and not is_num(env[k]):
                    p.append(f"env.{k} is {_fmt(env[k])}, not a finite number or null")
            if env.get("git_dirty") is not None and not isinstance(env["git_dirty"], bool):
                p.append(f"env.git_dirty is {_fmt(env['git_dirty'])}, not true, false or null")
    return p


def made_row_problems(r):
    """row_problems, and what a writer checks on the row it has just made: its tokens_per_s
    is the step's tokens (`tokens`, else batch * seq_len * grad_accum) over its median, as
    every writer derives it. Readers do not refuse a row for this (nor for an MFU above 1, as
    a CPU dry run measured against a GPU's peak has): a row edited by hand, a median moved
    alone, is still a row of valid figures, judged on its step time."""
    p = row_problems(r)
    if p:
        return p
    s, tps = r.get("step_ms"), r.get("tokens_per_s")
    tokens = r.get("tokens")
    if tokens is None and r.get("batch") is not None and r.get("seq_len") is not None:
        accum = (r.get("config") or {}).get("grad_accum", 1)
        tokens = r["batch"] * r["seq_len"] * accum if is_num(accum) else None
    if s is not None and tps is not None and tokens is not None:
        want = tokens * 1000.0 / s["median"]
        if abs(tps - want) > 1e-3 * want:
            p.append(f"tokens_per_s {tps:.6g} is not the step's {tokens:.6g} tokens over its median "
                     f"{s['median']:.6g} ms ({want:.6g})")
    elif s is None and tps is not None:
        p.append(f"tokens_per_s {tps:.6g} without a step time")
    return p


# The side files' rows (rows.SIDE_FILES: their own schemas): the keys their readers (docs.py,
# the campaign's summary) compute with, typed, so that a string there is a line, not a traceback.
SIDE_KEYS = {
    "megatrain.cpu_optimizers/1": {"impl": "string", "params_per_s": "number", "bytes_per_s": "number",
                                   "triad_gb_s": "number", "ratio_to_triad": "number", "threads": "count",
                                   "n_params": "count", "repeats": "count", "ratio_to_deepspeed": "number",
                                   "n_over_llc": "number", "bytes_per_param": "number", "env": "object"},
    "megatrain.peer_hooks/1": {"system": "string", "pass": "string", "fetch_overhead_ms": "number",
                               "model_fetches_per_layer": "number", "calls_per_layer": "number",
                               "ms_per_call": "number", "modules_per_layer": "number", "env": "object"},
}


def side_row_problems(r, want_schema):
    """What is wrong with one row of a side file whose schema is want_schema."""
    if not isinstance(r, dict):
        return [f"a row is a JSON object, not {type(r).__name__}"]
    if r.get("schema") != want_schema:
        return [f"schema is {_fmt(r.get('schema'))}, not {want_schema}"]
    return [f"{k} is {_fmt(r[k])}, not a{'n' if t == 'object' else ''} {t} or null"
            for k, t in SIDE_KEYS.get(want_schema, {}).items() if r.get(k) is not None and not _IS[t](r[k])]


def check_row(r, where, shape="results"):
    """RowsError "WHERE: problem; problem" unless the row is good."""
    p = row_problems(r, shape)
    if p:
        raise RowsError(f"{where}: {'; '.join(p)}")
    return r


def parse_line(line, where):
    """One line of a JSON Lines file, strictly parsed (loads); RowsError naming WHERE."""
    try:
        return loads(line)
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise RowsError(f"{where}: not a JSON object ({e})")
