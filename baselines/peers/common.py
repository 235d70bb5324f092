"""Shared pieces of the peer benchmarks (baselines/peers/*.py).

Everything a peer script needs so that its numbers are comparable with
megatrain's own rows (docs/DESIGN.md#metrics and docs/DESIGN.md#results):

  * the model: an HF config.json built with transformers'
    AutoModelForCausalLM.from_config (random init, --seed), optionally
    truncated in depth (--layers N: layers_run = N, layers_model = the config's);
  * the data: llm.c batching over a flat little-endian uint32 token file, or
    synthetic tokens drawn with the same windowing;
  * the loss: mean cross-entropy over all B*T tokens, computed from the final
    hidden states in token chunks, each chunk checkpointed, so no peer holds a
    full (B*T) x V logits tensor (like megatrain's chunked CE and the official
    code's 128-token loss head). The head's forward runs again for each chunk
    in backward: 2*V*d extra FLOPs per token, not counted in tflops;
  * AdamW hyper-parameters: lr 3e-4, wd 0.1 on >=2-D tensors only, betas
    0.9/0.95, eps 1e-8, clip 1.0 (global L2 norm);
  * timing: median/min/max over >=5 steps after >=2 warm-up steps, each step
    bracketed by torch.cuda.synchronize();
  * metrics: tflops = 6 * N_all * tokens / step_time (N_all = every parameter
    of the model that ran, embedding and head included, a tied matrix once);
    mfu against the dense bf16 peak: harness/metrics.py and megatrain/core/METRICS.md
    (the one definition of each metric), harness/dense_peaks.json (the one peak table);
  * the env block: harness/env.c's, through the mt-env binary ($MT_BIN or build/bin);
  * one results row with exactly the keys of docs/DESIGN.md#results, appended to a .jsonl file.

The training loop body (`train_step_torch`, `run_timed`) is plain PyTorch so
that tests can run it on the CPU without FSDP or DeepSpeed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "harness"))
import metrics  # noqa: E402  (harness/metrics.py)

T0 = time.time()  # this module is imported first, before torch: setup_s counts from here

SCHEMA = "megatrain.results/1"
RESULT_KEYS = (
    "schema", "experiment", "system", "mode", "model", "params", "layers_run",
    "layers_model", "batch", "seq_len", "precision", "step_ms", "tokens_per_s",
    "tflops", "mfu", "gpu_busy_frac", "h2d_gbps", "peak_gpu_bytes",
    "peak_host_bytes", "env",
)
ENV_KEYS = (
    "git_sha", "git_dirty", "gpu_name", "gpu_mem_bytes", "driver", "cuda",
    "host_mem_bytes", "cpu_model", "cpu_cores", "numa_nodes", "gpu_numa_node",
    "pcie_gbps", "hardware_profile", "utc",
)

# AdamW defaults of docs/DESIGN.md#batching-loss-and-optimizer-semantics.
LR, WEIGHT_DECAY, BETA1, BETA2, EPS, GRAD_CLIP = 3e-4, 0.1, 0.9, 0.95, 1e-8, 1.0

MIN_WARMUP, MIN_STEPS = 2, 5


class PeerError(Exception):
    """A bad input or an unusable environment: one clear line, exit status 1."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def skip(prog: str, msg: str) -> None:
    """What a measurement needs is missing here (torch, DeepSpeed, a binary): exit 77, CTest's skip."""
    print(f"{prog}: skipped: {msg}", file=sys.stderr)
    sys.exit(77)


def load_avg() -> Optional[float]:
    """The 1-minute load average, recorded beside timings taken on a shared machine."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# --------------------------------------------------------------------- metrics

def dense_peak_tflops(gpu_name: Optional[str]) -> Optional[float]:
    """Dense bf16 peak of the device (never the sparse figure); None if unknown."""
    return metrics.dense_peak_tflops(gpu_name)


def step_stats_ms(times_s: Iterable[float]) -> dict:
    t = [x * 1000.0 for x in times_s]
    if not t:
        raise PeerError("no timed steps")
    return {"median": statistics.median(t), "min": min(t), "max": max(t)}


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


def count_params(model) -> int:
    """All parameters, tied ones once (nn.Module.parameters() de-duplicates).
    ZeRO-3 partitioned parameters report their full size in ds_numel."""
    return int(sum(getattr(p, "ds_numel", None) or p.numel() for p in model.parameters()))


def peak_host_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


# ------------------------------------------------------------------------- env

def _read(path: str) -> Optional[str]:
    try:
        with open(path, "r") as f:
            return f.read()
    except OSError:
        return None


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
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    os.replace(tmp, path)
    for row in rows:
        print(json.dumps(row))


def append_jsonl(path: str, row: dict) -> None:
    """Appends one line; a single write() of a complete line, so concurrent
    appenders never interleave within a row."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    line = (json.dumps(row, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


# ------------------------------------------------------------------------ data

class TokenBatches:
    """llm.c batching: each micro-batch reads the next B*T+1 tokens; row j's
    inputs are tokens [jT, jT+T) of that window and its targets the same shifted
    by one; the cursor advances by B*T, and when fewer than B*T+1 tokens remain
    it restarts at 0. An id >= vocab_size is an error.

    path=None (or "synthetic"): tokens drawn uniformly from [0, vocab) with a
    seeded generator, windowed the same way (each window fresh)."""

    def __init__(self, path: Optional[str], batch: int, seq_len: int, vocab_size: int,
                 seed: int = 0):
        import numpy as np
        self.B, self.T, self.V = int(batch), int(seq_len), int(vocab_size)
        if self.B < 1 or self.T < 1:
            raise PeerError("--batch and --seq-len must be >= 1")
        self.cursor = 0
        self.path = None if path in (None, "", "synthetic") else path
        if self.path is None:
            self.rng = np.random.default_rng(seed)
            self.tokens = None
            return
        try:
            size = os.path.getsize(self.path)
        except OSError as e:
            raise PeerError("%s: cannot read token file (%s)" % (self.path, e.strerror))
        if size % 4:
            raise PeerError("%s: size %d is not a multiple of 4 (flat uint32 tokens expected)"
                            % (self.path, size))
        n = size // 4
        need = self.B * self.T + 1
        if n < need:
            raise PeerError("%s: %d tokens, a batch needs B*T+1 = %d" % (self.path, n, need))
        self.tokens = np.memmap(self.path, dtype="<u4", mode="r", shape=(n,))

    def next_window(self):
        """The next B*T+1 tokens as an int64 numpy array."""
        import numpy as np
        need = self.B * self.T + 1
        if self.tokens is None:
            return self.rng.integers(0, self.V, size=need, dtype=np.int64)
        if self.cursor + need > len(self.tokens):
            self.cursor = 0
        w = np.asarray(self.tokens[self.cursor:self.cursor + need], dtype=np.int64)
        if w.size and int(w.max()) >= self.V:
            bad = int(np.argmax(w >= self.V))
            raise PeerError("%s: token id %d at index %d >= vocab_size %d"
                            % (self.path, int(w[bad]), self.cursor + bad, self.V))
        self.cursor += self.B * self.T
        return w

    def next_batch(self, device=None):
        """(inputs, targets), each a [B, T] int64 torch tensor."""
        import torch
        w = torch.from_numpy(self.next_window())
        x = w[:-1].view(self.B, self.T)
        y = w[1:].view(self.B, self.T)
        if device is not None and str(device) != "cpu":
            x = x.pin_memory().to(device, non_blocking=True)
            y = y.pin_memory().to(device, non_blocking=True)
        return x, y


# ----------------------------------------------------------------------- model

@dataclass
class ModelSpec:
    name: str            # file stem, e.g. "qwen2.5-14b"
    config: object       # transformers PretrainedConfig, depth already truncated
    layers_run: int
    layers_model: int



def report(a, prog: str, system: str, spec, n_params: int, times, peak_gpu: int, extras=None) -> dict:
    """One timed configuration of a peer: the results row, appended to a.out (if set),
    printed on stdout, and summarized on stderr. `extras` (phase_fields) follow
    docs/DESIGN.md#results keys: the harness copies them into its sweep row."""
    row = make_row(
        experiment=a.experiment, system=system, model=spec.name, params=n_params,
        layers_run=spec.layers_run, layers_model=spec.layers_model, batch=a.batch,
        seq_len=a.seq_len, precision=a.precision, step_times_s=times,
        peak_gpu=peak_gpu, peak_host=peak_host_bytes(), env=collect_env())
    row.update(extras or {})
    if a.out:
        append_jsonl(a.out, row)
    print(json.dumps(row), flush=True)
    log("%s: median %.1f ms, %.1f TFLOP/s, mfu %s" % (prog, row["step_ms"]["median"], row["tflops"],
                                                     "%.3f" % row["mfu"] if row["mfu"] else "-"))
    if row.get("fwd_ms") is not None:
        log("%s: phases (medians) forward %.1f ms, backward %.1f ms, optimizer %.1f ms; setup %.1f s %s"
            % (prog, row["fwd_ms"], row["bwd_ms"], row["optimizer_ms"], row.get("setup_s") or 0,
               json.dumps(row.get("setup") or {})))
    return row


class Phases:
    """Per-step phase times, each bracketed by a device synchronize (so a phase's queued GPU
    work is charged to it, not to the next). The sync costs a few microseconds per phase, a
    small price for knowing where a peer's step goes: forward, backward, optimizer."""

    def __init__(self, device=None):
        self.device, self.t, self.cur = device, None, {}

    def start(self) -> None:
        _sync(self.device)
        self.t, self.cur = time.perf_counter(), {}

    def mark(self, name: str) -> None:
        _sync(self.device)
        now = time.perf_counter()
        self.cur[name] = (now - self.t) * 1000.0
        self.t = now

    def take(self) -> dict:
        cur, self.cur = self.cur, {}
        return cur


def phase_fields(rows, setup: dict) -> dict:
    """The row's extra fields: medians over the timed steps of each phase (fwd_ms, bwd_ms,
    optimizer_ms), setup_s (process start to the first step) and its parts (setup)."""
    timed = [r for r in rows if not r.get("warmup")]
    out = {}
    for k in ("fwd_ms", "bwd_ms", "optimizer_ms"):
        v = [r[k] for r in timed if isinstance(r.get(k), (int, float))]
        out[k] = statistics.median(v) if v else None
    out["setup_s"] = setup.get("total_s")
    out["setup"] = {k: round(v, 2) for k, v in setup.items() if k != "total_s"}
    return out

def load_config(path: str, layers: Optional[int] = None) -> ModelSpec:
    """Reads an HF config.json (or a directory holding one); --layers N overrides
    num_hidden_layers for the run while layers_model keeps the file's value."""
    p = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        with open(p) as f:
            raw = json.load(f)
    except OSError as e:
        raise PeerError("%s: cannot read model config (%s)" % (p, e.strerror))
    except json.JSONDecodeError as e:
        raise PeerError("%s: malformed JSON (%s)" % (p, e))
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise PeerError("%s: not an HF config.json (no model_type)" % p)
    L = raw.get("num_hidden_layers")
    if not isinstance(L, int) or L < 1:
        raise PeerError("%s: num_hidden_layers missing or invalid" % p)
    if layers is not None and not (1 <= layers <= L):
        raise PeerError("--layers %s: must be in 1..%d (the config's num_hidden_layers)" % (layers, L))
    run = layers if layers is not None else L
    kw = {"num_hidden_layers": run, "use_cache": False}
    # Per-layer lists (Qwen3 layer_types, ...) follow the truncated depth.
    if isinstance(raw.get("layer_types"), list):
        kw["layer_types"] = raw["layer_types"][:run]
    if "max_window_layers" in raw and isinstance(raw["max_window_layers"], int):
        kw["max_window_layers"] = min(raw["max_window_layers"], run)
    try:
        cfg = _config_from_dict(raw, kw)
    except (ValueError, KeyError, TypeError) as e:
        raise PeerError("%s: transformers cannot build this config (%s)" % (p, e))
    name = os.path.splitext(os.path.basename(os.path.normpath(path)))[0]
    if name == "config":
        name = os.path.basename(os.path.dirname(os.path.abspath(p)))
    return ModelSpec(name=name, config=cfg, layers_run=run, layers_model=L)


def _config_from_dict(raw: dict, overrides: dict):
    from transformers import AutoConfig
    d = dict(raw)
    d.update(overrides)
    model_type = d.pop("model_type")
    return AutoConfig.for_model(model_type, **d)


def build_model(spec: ModelSpec, *, dtype, seed: int, device=None, attn: str = "sdpa"):
    """Random-init model from the config (transformers' own init, seeded)."""
    import torch
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    kwargs = {"dtype": dtype, "attn_implementation": attn}
    if device is not None:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(spec.config, **kwargs)
    else:
        model = AutoModelForCausalLM.from_config(spec.config, **kwargs)
    model.config.use_cache = False
    return model


def count_params_meta(spec: ModelSpec) -> int:
    """N_all of the model the spec describes, from a build on the meta device
    (no memory, no init)."""
    import torch
    with torch.device("meta"):
        m = build_model(spec, dtype=torch.bfloat16, seed=0)
    return count_params(m)


def host_mem_available() -> Optional[int]:
    m = re.search(r"^MemAvailable:\s+(\d+)\s+kB", _read("/proc/meminfo") or "", re.M)
    return int(m.group(1)) * 1024 if m else None


def check_host_budget(n_params: int, bytes_per_param: float, what: str) -> None:
    """Refuses, with the numbers, a run whose persistent host state would not fit
    in 90% of MemAvailable (better than the OOM killer taking the machine)."""
    need = n_params * bytes_per_param
    avail = host_mem_available()
    if avail is not None and need > 0.9 * avail:
        raise PeerError("%s needs about %.1f GiB of host memory (%.0f B/param x %d params), "
                        "%.1f GiB available: run fewer layers (--layers)"
                        % (what, need / 2**30, bytes_per_param, n_params, avail / 2**30))


def decoder_layers(model):
    """The ModuleList of decoder layers of an HF causal LM."""
    base = getattr(model, model.base_model_prefix, None)
    layers = getattr(base, "layers", None)
    if layers is None:
        raise PeerError("%s: cannot find the decoder layers (base.layers)" % type(model).__name__)
    return layers


def checkpoint_each_layer(model) -> int:
    """Activation checkpointing per decoder layer: wraps each layer in
    torch.distributed's checkpoint_wrapper (non-reentrant, torchtitan's recipe);
    a wrapped layer keeps its input, recomputes its forward in backward."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    layers = decoder_layers(model)
    for i in range(len(layers)):
        layers[i] = checkpoint_wrapper(layers[i])
    return len(layers)


def _ce_chunk_sum(h, t, head):
    import torch.nn.functional as F
    logits = head(h).float()
    return F.cross_entropy(logits, t, reduction="sum")


def chunked_ce_mean(hidden, head, targets, chunk: int):
    """Mean CE over all tokens: logits of `chunk` tokens at a time in fp32,
    each chunk checkpointed (only its hidden slice is saved)."""
    from torch.utils.checkpoint import checkpoint
    h = hidden.reshape(-1, hidden.shape[-1])
    t = targets.reshape(-1)
    n = h.shape[0]
    total = None
    for i in range(0, n, chunk):
        part = checkpoint(_ce_chunk_sum, h[i:i + chunk], t[i:i + chunk], head, use_reentrant=False)
        total = part if total is None else total + part
    return total / n


def make_loss_model(model, ce_chunk: int):
    """Wraps an HF causal LM as a module whose forward(input_ids, targets)
    returns the mean CE, computed from the decoder's last hidden state in chunks.
    FSDP2 shards this wrapper as its root, DeepSpeed wraps it as its module."""
    import torch.nn as nn

    class CausalLMChunkedLoss(nn.Module):
        def __init__(self, lm, chunk):
            super().__init__()
            self.lm = lm
            self.chunk = int(chunk)

        def forward(self, input_ids, targets):
            base = getattr(self.lm, self.lm.base_model_prefix)
            out = base(input_ids=input_ids, use_cache=False)
            hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
            return chunked_ce_mean(hidden, self.lm.get_output_embeddings(), targets, self.chunk)

    if ce_chunk < 1:
        raise PeerError("--ce-chunk must be >= 1")
    return CausalLMChunkedLoss(model, ce_chunk)


def adamw_param_groups(params, weight_decay: float = WEIGHT_DECAY):
    """Weight decay only on tensors with >= 2 dimensions (ZeRO-3 partitioned
    parameters are judged by their full ds_shape)."""
    decay, no_decay, seen = [], [], set()
    for p in params:
        if id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        shape = getattr(p, "ds_shape", None) or p.shape
        (decay if len(shape) >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


# ------------------------------------------------------------------ the loop

def train_step_torch(loss_model, optimizer, params, x, y, clip: float = GRAD_CLIP, phases=None):
    """One step as every torch-optimizer peer runs it (plain torch and FSDP2):
    forward + backward, clip_grad_norm_ on the global L2 norm, AdamW step.
    Returns (loss, grad_norm) as tensors (no host sync here unless `phases` times them:
    fwd_ms, bwd_ms, optimizer_ms = clipping + AdamW + zero_grad)."""
    import torch
    if phases:
        phases.start()
    loss = loss_model(x, y)
    if phases:
        phases.mark("fwd_ms")
    loss.backward()
    if phases:
        phases.mark("bwd_ms")
    gn = torch.nn.utils.clip_grad_norm_(params, clip) if clip and clip > 0 else None
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if phases:
        phases.mark("optimizer_ms")
    return loss, gn


def _sync(device) -> None:
    import torch
    if device is not None and str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def run_timed(step_fn: Callable, batches: TokenBatches, *, warmup: int, steps: int,
              device=None, label: str = "", phases: Optional[Phases] = None) -> tuple:
    """Runs warmup + steps steps; each timed from a synchronized start to a
    synchronized end, the batch fetch and host-to-device copy included.
    step_fn(x, y) -> (loss, grad_norm); with `phases` (the Phases step_fn marks), each
    log row also has the step's phase times. Returns (timed step seconds, log rows)."""
    times, rows = [], []
    for i in range(warmup + steps):
        _sync(device)
        t0 = time.perf_counter()
        x, y = batches.next_batch(device)
        loss, gn = step_fn(x, y)
        _sync(device)
        dt = time.perf_counter() - t0
        lv = float(loss.detach().float().item()) if hasattr(loss, "detach") else float(loss)
        gv = None
        if gn is not None:
            g = gn.full_tensor() if hasattr(gn, "full_tensor") else gn
            gv = float(g.float().item()) if hasattr(g, "item") else float(g)
        r = {"step": i + 1, "warmup": i < warmup, "loss": lv, "grad_norm": gv,
             "tokens": batches.B * batches.T, "step_ms": dt * 1000.0}
        if phases is not None:
            r.update(phases.take())
        rows.append(r)
        log("%s step %d/%d%s loss %.4f grad_norm %s %.1f ms"
            % (label, i + 1, warmup + steps, " (warm-up)" if i < warmup else "",
               lv, "%.3f" % gv if gv is not None else "-", dt * 1000.0))
        if lv != lv:  # NaN
            raise PeerError("loss is NaN at step %d" % (i + 1))
        if i >= warmup:
            times.append(dt)
    return times, rows


# ------------------------------------------------------------------------ CLI

def add_common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--config", required=True, help="HF config.json (or a directory holding one)")
    ap.add_argument("--layers", type=int, default=None,
                    help="run N decoder layers (layers_run); layers_model stays the config's")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--data", default="synthetic", help="flat uint32 token file, or 'synthetic'")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--warmup", type=int, default=MIN_WARMUP, help="warm-up steps (>= 2)")
    ap.add_argument("--steps", type=int, default=MIN_STEPS, help="timed steps (>= 5)")
    ap.add_argument("--precision", default="mixed", choices=["mixed", "fp32"],
                    help="mixed: fp32 master + fp32 Adam moments, bf16 compute (default); fp32: all fp32")
    ap.add_argument("--ce-chunk", type=int, default=4096, help="tokens per loss-head chunk")
    ap.add_argument("--experiment", default="peers")
    ap.add_argument("--out", default=None, help="append the results row to this .jsonl")
    ap.add_argument("--allow-short", action="store_true",
                    help="permit fewer than 2 warm-up / 5 timed steps (smoke tests only)")


def check_common_args(a) -> None:
    if not a.allow_short and (a.warmup < MIN_WARMUP or a.steps < MIN_STEPS):
        raise PeerError("--warmup must be >= %d and --steps >= %d (docs/DESIGN.md#metrics timing rule)"
                        % (MIN_WARMUP, MIN_STEPS))
    if a.steps < 1 or a.warmup < 0:
        raise PeerError("--steps must be >= 1 and --warmup >= 0")
    if a.batch < 1 or a.seq_len < 1:
        raise PeerError("--batch and --seq-len must be >= 1")


def setup_single_rank_env(port: Optional[int] = None) -> None:
    """torch.distributed env:// variables for a world of one process."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if port is None:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    os.environ.setdefault("MASTER_PORT", str(port))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_WORLD_SIZE", "1")


def main_guard(fn: Callable[[], int], prog: str) -> None:
    """Runs fn; a PeerError is one line on stderr and exit status 1."""
    try:
        rc = fn()
    except PeerError as e:
        print("%s: %s" % (prog, e), file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(rc or 0)
