"""peer_results.py: a peer's numbers as megatrain's rows have them (common.py re-exports
it): the metrics (harness/metrics.py), the env block (mt-env), the results row (the
schema, writing and step statistics: harness/resultslib) and its report.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import resource
import subprocess
from typing import Iterable, Optional

from .peer_base import ROOT, PeerError, log

from harness import metrics  # harness/metrics.py
from harness import resultslib
from harness.resultslib import ENV_KEYS, RESULT_KEYS, append_jsonl  # append_jsonl: one write() per line
from harness.resultslib import RESULTS_SCHEMA as SCHEMA


# --------------------------------------------------------------------- metrics

def dense_peak_tflops(gpu_name: Optional[str]) -> Optional[float]:
    """Dense bf16 peak of the device (never the sparse figure); None if unknown."""
    return metrics.dense_peak_tflops(gpu_name)


def step_stats_ms(times_s: Iterable[float]) -> dict:
    t = [x * 1000.0 for x in times_s]
    if not t:
        raise PeerError("no timed steps")
    return resultslib.spread(t)


def throughput(params: int, batch: int, seq_len: int, step_ms_median: float,
               gpu_name: Optional[str]) -> dict:
    """tokens_per_s, tflops (6*N*tokens/step) and mfu for one configuration."""
    tokens = batch * seq_len
    tflops = metrics.tflops(params, tokens, step_ms_median)
    return {
        "tokens_per_s": metrics.tokens_per_s(tokens, step_ms_median),
        "tflops": tflops,
        "mfu": metrics.mfu(tflops, dense_peak_tflops(gpu_name)),
    }


def model_throughput(spec, params: int, tokens: int, seq_len: int, step_ms_median: float,
                     gpu_name: Optional[str]) -> dict:
    """model_flops_per_token, model_tflops and model_mfu (core/METRICS.md: no input embedding,
    causal attention included) of the model that ran, at its depth."""
    fpt = metrics.model_flops_of_config(spec.config.to_dict(), params, spec.layers_run, seq_len)
    mt = metrics.model_tflops(fpt, tokens, step_ms_median)
    return {"model_flops_per_token": fpt, "model_tflops": mt, "model_mfu": metrics.mfu(mt, dense_peak_tflops(gpu_name))}


def peak_host_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


# ------------------------------------------------------------------------- env

def _mt_env_binary() -> Optional[str]:
    for d in (os.environ.get("MT_BIN"), os.path.join(ROOT, "build", "bin")):
        if d and os.access(os.path.join(d, "mt-env"), os.X_OK):
            return os.path.join(d, "mt-env")
    return None


def collect_env(hardware_profile: Optional[str] = None) -> dict:
    """The env block of docs/DESIGN.md#results from mt-env (harness/env.c, its one implementation),
    with what only this PyTorch process knows: the CUDA version torch runs on, and
    the GPU's name and memory where nvidia-smi gave none."""
    exe = _mt_env_binary()
    if exe is None:
        raise PeerError("mt-env not found in $MT_BIN or build/bin: build it (make) or point MT_BIN at a bundle's bin/")
    cmd = [exe] + (["--hardware-profile", hardware_profile] if hardware_profile else [])
    try:
        env = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    except (OSError, subprocess.CalledProcessError, json.JSONDecodeError) as e:
        raise PeerError("%s failed: %s" % (exe, getattr(e, "stderr", None) or e))
    try:
        import torch
        env["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            if env.get("gpu_name") is None:
                env["gpu_name"] = torch.cuda.get_device_name(0)
            if env.get("gpu_mem_bytes") is None:
                env["gpu_mem_bytes"] = int(torch.cuda.get_device_properties(0).total_memory)
    except Exception:  # noqa: BLE001 - torch's view is a refinement, never a failure
        pass
    return {k: env.get(k) for k in ENV_KEYS}


# --------------------------------------------------------------------- results

def make_row(*, experiment: str, system: str, model: str, params: int,
             layers_run: int, layers_model: int, batch: int, seq_len: int,
             precision: str, step_times_s: list, peak_gpu: Optional[int],
             peak_host: Optional[int], env: dict, gpu_busy_frac=None,
             h2d_gbps=None, mode: str = "measured") -> dict:
    st = step_stats_ms(step_times_s)
    tp = throughput(params, batch, seq_len, st["median"], env.get("gpu_name"))
    row = {
        "schema": SCHEMA, "experiment": experiment, "system": system, "mode": mode,
        "model": model, "params": int(params), "layers_run": int(layers_run),
        "layers_model": int(layers_model), "batch": int(batch), "seq_len": int(seq_len),
        "precision": precision, "step_ms": st, "tokens_per_s": tp["tokens_per_s"],
        "tflops": tp["tflops"], "mfu": tp["mfu"], "gpu_busy_frac": gpu_busy_frac,
        "h2d_gbps": h2d_gbps, "peak_gpu_bytes": peak_gpu, "peak_host_bytes": peak_host,
        "env": {k: env.get(k) for k in ENV_KEYS},
    }
    assert tuple(row) == RESULT_KEYS
    return row


def error_row(*, experiment: str, system: str, model: Optional[str], batch, seq_len,
              layers_run, error: str) -> dict:
    """What run_peers.sh appends for a peer that failed (not a measurement)."""
    return {"schema": SCHEMA, "experiment": experiment, "system": system, "model": model,
            "batch": batch, "seq_len": seq_len, "layers_run": layers_run,
            "error": error,
            "utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_jsonl(path: str, rows: list) -> None:
    """Replaces `path` with `rows`, one JSON line each, atomically (tmp + rename: an
    interrupted run leaves the old file whole), and echoes them on stdout."""
    resultslib.write_jsonl(path, rows, compact=False)
    for row in rows:
        print(json.dumps(row))


def emit_row(out: Optional[str], row: dict) -> None:
    """A measured row, appended to `out` (if set) and printed on stdout, once the row check
    takes it: a NaN, an inverted range or a throughput that is not the step's is this
    run's error (PeerError), never a row a reader would refuse."""
    problems = resultslib.schema.made_row_problems(row)
    if problems:
        raise PeerError("the row check refused the row this run made: " + "; ".join(problems))
    if out:
        append_jsonl(out, row, shape="results")
    print(json.dumps(row, allow_nan=False), flush=True)


def report(a, prog: str, system: str, spec, n_params: int, times, peak_gpu: int, extras=None) -> dict:
    """One timed configuration of a peer: the results row, appended to a.out (if set),
    printed on stdout, and summarized on stderr. `extras` (phase_fields) follow
    docs/DESIGN.md#results keys: the harness copies them into its sweep row."""
    row = make_row(
        experiment=a.experiment, system=system, model=spec.name, params=n_params,
        layers_run=spec.layers_run, layers_model=spec.layers_model, batch=a.batch,
        seq_len=a.seq_len, precision=a.precision, step_times_s=times,
        peak_gpu=peak_gpu, peak_host=peak_host_bytes(), env=collect_env())
    row.update(model_throughput(spec, n_params, a.batch * a.seq_len, a.seq_len, row["step_ms"]["median"],
                                row["env"].get("gpu_name")))
    row.update(extras or {})
    emit_row(a.out, row)
    log("%s: median %.1f ms, %.1f TFLOP/s, mfu %s" % (prog, row["step_ms"]["median"], row["tflops"],
                                                     "%.3f" % row["mfu"] if row["mfu"] else "-"))
    if row.get("fwd_ms") is not None:
        log("%s: phases (medians) forward %.1f ms, backward %.1f ms, optimizer %.1f ms; setup %.1f s %s"
            % (prog, row["fwd_ms"], row["bwd_ms"], row["optimizer_ms"], row.get("setup_s") or 0,
               json.dumps(row.get("setup") or {})))
    return row
