"""peer_model.py: the peers' model (common.py re-exports it): an HF config.json built
with transformers (depth cut with --layers), its parameter count, the host-memory check,
per-layer activation checkpointing, the chunked cross-entropy loss and the AdamW groups.
torch and transformers are imported where used.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Optional

from .peer_base import WEIGHT_DECAY, PeerError


@dataclass
class ModelSpec:
    name: str            # file stem, e.g. "qwen2.5-14b"
    config: object       # transformers PretrainedConfig, depth already truncated
    layers_run: int
    layers_model: int


def count_params(model) -> int:
    """All parameters, tied ones once (nn.Module.parameters() de-duplicates).
    ZeRO-3 partitioned parameters report their full size in ds_numel."""
    return int(sum(getattr(p, "ds_numel", None) or p.numel() for p in model.parameters()))


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


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "r") as f:
            return f.read()
    except OSError:
        return None


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


def checkpoint_each_layer(model, keep_last: bool = True) -> int:
    """Activation checkpointing per decoder layer: wraps each layer in
    torch.distributed's checkpoint_wrapper (non-reentrant, torchtitan's recipe);
    a wrapped layer keeps its input, recomputes its forward in backward. keep_last: the
    last layer is not wrapped (its backward follows its forward at once, so it keeps its
    activations: megatrain's step recomputes every layer but the last alike).
    Returns the number of layers recomputed."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    layers = decoder_layers(model)
    n = len(layers) - 1 if keep_last and len(layers) > 1 else len(layers)
    for i in range(n):
        layers[i] = checkpoint_wrapper(layers[i])
    return n


def _ce_chunk_sum(h, t, head):
    import torch.nn.functional as F
    logits = head(h).float()
    return F.cross_entropy(logits, t, reduction="sum")


def chunked_ce_mean(hidden, head, targets, chunk: int, recompute: bool = True):
    """Mean CE over all tokens: logits of `chunk` tokens at a time in fp32, each chunk
    checkpointed (only its hidden slice is saved; the head's forward runs again in
    backward), or with recompute False kept (the head's forward once, every chunk's
    logits held until backward: B*T*V*4 bytes)."""
    from torch.utils.checkpoint import checkpoint
    h = hidden.reshape(-1, hidden.shape[-1])
    t = targets.reshape(-1)
    n = h.shape[0]
    total = None
    for i in range(0, n, chunk):
        if recompute:
            part = checkpoint(_ce_chunk_sum, h[i:i + chunk], t[i:i + chunk], head, use_reentrant=False)
        else:
            part = _ce_chunk_sum(h[i:i + chunk], t[i:i + chunk], head)
        total = part if total is None else total + part
    return total / n


def work_fields(layers_run: int, recomputed_layers: int, head_forwards: int) -> dict:
    """What a peer's step computes beside its model FLOPs, and where that differs from
    megatrain's step (which recomputes every layer but the last, and runs the loss head's
    forward once: engine/head.c consumes d(logits) at once): `work` and `work_differs`
    (empty when the step does the same work)."""
    differs = []
    if recomputed_layers != max(layers_run - 1, 0):
        differs.append("recomputes %d of %d layers (megatrain %d)" % (recomputed_layers, layers_run,
                                                                      max(layers_run - 1, 0)))
    if head_forwards != 1:
        differs.append("the loss head's forward runs %d times (checkpointed chunked loss; megatrain once)"
                       % head_forwards)
    return {"work": {"recomputed_layers": recomputed_layers, "loss_head_forwards": head_forwards},
            "work_differs": differs}


def make_loss_model(model, ce_chunk: int, recompute_head: bool = True):
    """Wraps an HF causal LM as a module whose forward(input_ids, targets)
    returns the mean CE, computed from the decoder's last hidden state in chunks.
    FSDP2 shards this wrapper as its root, DeepSpeed wraps it as its module."""
    import torch.nn as nn

    class CausalLMChunkedLoss(nn.Module):
        def __init__(self, lm, chunk):
            super().__init__()
            self.lm = lm
            self.chunk = int(chunk)
            self.recompute_head = bool(recompute_head)

        def forward(self, input_ids, targets):
            base = getattr(self.lm, self.lm.base_model_prefix)
            out = base(input_ids=input_ids, use_cache=False)
            hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
            return chunked_ce_mean(hidden, self.lm.get_output_embeddings(), targets, self.chunk,
                                   self.recompute_head)

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
