#!/usr/bin/env python3
"""torch_reference.py: what PyTorch (cuBLAS, SDPA) does on the shapes our CUDA
backend runs, on the same GPU, for the ratios of issues 3 and 16: layer GEMMs vs
cuBLAS alone, and attention forward+backward (1k..128k tokens) vs
scaled_dot_product_attention. Run on the GPU machine (PyTorch is there):
    python3 megatrain/backends/cuda/lab/torch_reference.py [--attention-only]
Prints one JSON object per measurement (median of 10 after 3 warm-ups, 3 at >= 32k
tokens; CUDA events).
"""
import json
import sys

import torch


def timed(fn, reps=10, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def gemms(tokens=16384, C=3584, QKV=4608, F=18944):
    """Qwen2.5-7B's layer GEMMs in bf16, f32 accumulate: forward and both backward products."""
    shapes = {"qkv": (C, QKV), "o": (3584, C), "gate_up": (C, 2 * F), "down": (F, C)}
    for name, (k, n) in shapes.items():
        x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        dy = torch.randn(tokens, n, device="cuda", dtype=torch.bfloat16)
        for what, fn in (("fwd", lambda: x @ w.t()), ("dinp", lambda: dy @ w), ("dw", lambda: dy.t() @ x)):
            med, lo, hi = timed(fn)
            flops = 2.0 * tokens * k * n
            print(json.dumps({"bench": f"gemm/torch/{name}/{what}", "m": tokens, "k": k, "n": n, "ms": med,
                              "min_ms": lo, "max_ms": hi, "tflops": flops / med / 1e9}))


def attention(B=1, NH=28, NKV=4, HD=128, lengths=tuple(1024 << i for i in range(8))):
    """Causal GQA attention forward+backward through SDPA at 1k..128k tokens, once with
    PyTorch's default backend choice and once pinned to each fused backend (cuDNN, flash),
    to set beside attention --sweep (native and cuDNN through megatrain). A backend that
    refuses the shape prints an "error" field instead of a time."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    pins = (("torch_sdpa", None), ("torch_sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
            ("torch_sdpa_flash", SDPBackend.FLASH_ATTENTION))
    for T in lengths:
        q = torch.randn(B, NH, T, HD, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(B, NKV, T, HD, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(B, NKV, T, HD, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        dout = torch.randn(B, NH, T, HD, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * B * NH * T * T * HD * 3.5  # causal: fwd 2·B·NH·T²·HD, bwd 2.5x
        reps = 3 if T >= 32768 else 10
        for name, pin in pins:
            def fwd_bwd():
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                out.backward(dout)

            row = {"bench": f"attention/{name}/fwd_bwd", "B": B, "T": T, "NH": NH, "NKV": NKV, "HD": HD}
            try:
                if pin is None:
                    med, lo, hi = timed(fwd_bwd, reps)
                else:
                    with sdpa_kernel([pin]):
                        med, lo, hi = timed(fwd_bwd, reps)
                row.update({"ms": med, "min_ms": lo, "max_ms": hi, "tflops": flops / med / 1e9})
            except RuntimeError as e:
                row["error"] = str(e).splitlines()[0][:200]
            print(json.dumps(row), flush=True)
            q.grad = k.grad = v.grad = None
        del q, k, v, dout
        torch.cuda.empty_cache()


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("torch_reference: no CUDA device", file=sys.stderr)
        sys.exit(77)
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()}))
    if "--attention-only" not in sys.argv:
        gemms()
    attention()
