"""metrics.py: the reported metrics, defined once for the Python side.

The C side is megatrain/core/metrics.c; both follow megatrain/core/METRICS.md
operation for operation, so a row computed here and a JSON line printed by
`megatrain` agree digit for digit (harness/tests/test_metrics.sh checks it).
Dense peaks come from harness/dense_peaks.json, the one table of them.
"""

from __future__ import annotations

import json
import os
from typing import Optional

_PEAKS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dense_peaks.json")
_peaks = None


def tokens_per_s(tokens: float, step_ms: float) -> float:
    return tokens / (step_ms / 1e3)


def tflops(params: float, tokens: float, step_ms: float) -> float:
    """6 * N_all * tokens / step time (all parameters, padded tokens, the whole step)."""
    return 6.0 * params * tokens / (step_ms / 1e3) / 1e12


def params_model(params: float, vocab: float, hidden: float, tied: bool) -> float:
    """The parameters whose FLOPs a token costs: all but the input embedding (tied: kept, it is the head)."""
    return params if tied else params - vocab * hidden


def model_flops_per_token(params_model_: float, layers: float, heads: float, head_dim: float,
                          seq_len: float) -> float:
    """6 * N_model + 6 * L * NH * HD * T: PaLM's model FLOPs with its attention term halved (causal)."""
    return 6.0 * params_model_ + 6.0 * layers * heads * head_dim * seq_len


def model_tflops(flops_per_token: float, tokens: float, step_ms: float) -> float:
    return flops_per_token * tokens / (step_ms / 1e3) / 1e12


def model_flops_of_config(cfg: dict, params: float, layers: int, seq_len: int) -> float:
    """model_flops_per_token of an HF config.json's model at `layers` layers (head_dim from the
    config where it says one, else hidden / heads)."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or h // heads
    n = params_model(params, cfg["vocab_size"], h, bool(cfg.get("tie_word_embeddings")))
    return model_flops_per_token(n, layers, heads, hd, seq_len)


def mfu(tflops_: float, peak_tflops: Optional[float]) -> Optional[float]:
    """tflops over the device's dense bf16 peak; None when the peak is unknown."""
    return tflops_ / peak_tflops if peak_tflops else None


def hfu(flops_executed: float, step_ms: float, peak_tflops: float) -> float:
    """FLOPs the device executed (with recompute) per second over the dense bf16 peak."""
    return flops_executed / (step_ms / 1e3) / 1e12 / peak_tflops


def days_per_billion_tokens(tokens_per_s_: float) -> float:
    return 1e9 / tokens_per_s_ / 86400.0


def gbps(nbytes: float, ms: float) -> float:
    """Decimal GB/s over the time the bytes took; 0 when no time was spent."""
    return nbytes / (ms * 1e6) if ms > 0 else 0.0


def busy_frac(busy_ms: float, step_ms: float) -> float:
    return busy_ms / step_ms if step_ms > 0 else 0.0


def dense_peak_tflops(gpu_name: Optional[str]) -> Optional[float]:
    """Dense bf16 peak of the named device (harness/dense_peaks.json); None if unknown."""
    global _peaks
    if not gpu_name:
        return None
    if _peaks is None:
        with open(_PEAKS_PATH) as f:
            _peaks = json.load(f)["gpus"]
    name = gpu_name.upper()
    for g in _peaks:
        if all(w.upper() in name for w in g["match"].split()):
            return float(g["bf16_tflops"])
    return None
