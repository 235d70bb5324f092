#!/usr/bin/env python3
"""DeepSpeed ZeRO-3 with parameter and optimizer offload to the CPU, one GPU.

    python3 -m baselines.peers.deepspeed_zero3 --config experiments/models/qwen2.5-14b.json \
        --layers 8 --batch 16 --seq-len 1024 --out results/peers.jsonl

The configuration is the one claim C2 compares against ("DeepSpeed ZeRO-3 with CPU
offload"), tuned the way DeepSpeed documents it, not crippled:
  * zero_optimization: stage 3, offload_param {device: cpu, pin_memory: true},
    offload_optimizer {device: cpu, pin_memory: true}, overlap_comm true,
    contiguous_gradients true; every other stage-3 knob at DeepSpeed's default
    unless a --ds-* flag sets it (--ds-hf-auto: the values HF Trainer's "auto"
    computes from hidden_size: reduce_bucket_size = h^2,
    stage3_prefetch_bucket_size = 0.9 h^2, stage3_param_persistence_threshold = 10 h);
  * bf16 {enabled: true}, gradient_clipping 1.0, micro batch = --batch, no accumulation;
  * DeepSpeedCPUAdam(adamw_mode=True, fp32 moments), lr 3e-4, betas 0.9/0.95,
    eps 1e-8, weight decay 0.1 on >= 2-D tensors only;
  * the model built under HF's ZeRO-3 integration (HfDeepSpeedConfig ->
    deepspeed.zero.Init), so parameters are partitioned to pinned host memory as
    they are created;
  * activation checkpointing per decoder layer but the last, as megatrain recomputes
    (torch checkpoint_wrapper, non-reentrant; every parameter is trainable, so ZeRO-3
    re-gathers in recompute); --no-checkpointing where the activations fit;
  * --ds-layer-sized (prefetch bucket one layer, max live >= 3 layers, persistence 10 h),
    --ds-offload-ratio (ZeRO-Offload++), --ds-threads / --ds-bind-cores (CPU Adam's
    OpenMP threads and their cores): the grid of the C2 campaign part; the row's `ds`
    records every knob, the threads and the cores, `work`/`work_differs` the recompute.

What each parameter keeps (--precision mixed, the default): host: bf16 parameter
2 B + fp32 master 4 B + fp32 Adam m, v 8 B + fp32 gradient partition 4 B = 18 B/param
(plus pinned staging buffers); GPU: gathered bf16 parameters of the live
submodules (stage3_max_live_parameters), prefetch buckets, activations.
--precision fp32 disables bf16 (fp32 everywhere).

DeepSpeed's CPU Adam is a C++ op JIT-built on first use (ninja, g++, Python.h,
torch headers: all present where torch.utils.cpp_extension works). This script
builds it before anything else and, if it cannot, exits 3 with one line:
"deepspeed_zero3: cannot load DeepSpeed's CPU Adam op: ...". --torch-adam runs
instead with torch.optim.AdamW on the CPU (zero_force_ds_cpu_optimizer false),
recorded as system "deepspeed_zero3_torchadam": a weaker configuration, never to
be reported as the DeepSpeed baseline.
"""

import argparse
import json
import os
import sys
import time

from . import common
from .common import PeerError, log

PROG = "deepspeed_zero3"
EXIT_NO_OP = 3
_KEEP_ALIVE = []


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    common.add_common_args(ap)
    ap.add_argument("--ds-prefetch-bucket", type=float, default=None, help="stage3_prefetch_bucket_size")
    ap.add_argument("--ds-max-live", type=float, default=None, help="stage3_max_live_parameters")
    ap.add_argument("--ds-max-reuse", type=float, default=None, help="stage3_max_reuse_distance")
    ap.add_argument("--ds-persistence-threshold", type=float, default=None,
                    help="stage3_param_persistence_threshold")
    ap.add_argument("--ds-reduce-bucket", type=float, default=None, help="reduce_bucket_size")
    ap.add_argument("--ds-sub-group", type=float, default=None, help="sub_group_size")
    ap.add_argument("--ds-hf-auto", action="store_true",
                    help="HF Trainer's 'auto' bucket/persistence values from hidden_size")
    ap.add_argument("--ds-layer-sized", action="store_true",
                    help="DeepSpeed's guidance for offload: prefetch bucket = one layer's parameters, max live "
                         "parameters >= 3 layers, persistence threshold 10 h (HF 'auto'); --ds-* flags override")
    ap.add_argument("--ds-offload-ratio", type=float, default=None,
                    help="offload_optimizer.ratio (ZeRO-Offload++): the share of optimizer states on the CPU, "
                         "the rest updated on the GPU")
    ap.add_argument("--ds-threads", type=int, default=0,
                    help="CPU Adam's OpenMP threads (0: every core this process may run on)")
    ap.add_argument("--ds-bind-cores", action="store_true",
                    help="bind the process to those cores (the deepspeed launcher's --bind_cores_to_rank)")
    ap.add_argument("--ds-pageable", action="store_true", help="pin_memory false for both offloads")
    ap.add_argument("--torch-adam", action="store_true",
                    help="torch.optim.AdamW instead of DeepSpeedCPUAdam (a fallback, not the baseline)")
    return common.parse_common_args(ap, argv)


def layer_params(config) -> int:
    """One decoder layer's parameters (its matrices: attention and MLP; norms and biases
    aside), the unit DeepSpeed's prefetch and live-parameter limits should hold whole."""
    h, inter = int(config.hidden_size), int(config.intermediate_size)
    heads = int(config.num_attention_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    hd = int(getattr(config, "head_dim", None) or h // heads)
    return h * heads * hd * 2 + 2 * h * kv * hd + 3 * h * inter


def ds_config(a, hidden_size: int, layer: int = 0) -> dict:
    """The DeepSpeed config dict for these arguments (validated by the tests
    against DeepSpeed's own pydantic models when deepspeed is importable);
    `layer`: one layer's parameters (layer_params), for --ds-layer-sized."""
    pin = not a.ds_pageable
    zero = {
        "stage": 3,
        "offload_param": {"device": "cpu", "pin_memory": pin},
        "offload_optimizer": {"device": "cpu", "pin_memory": pin},
        "overlap_comm": True,
        "contiguous_gradients": True,
    }
    if a.ds_offload_ratio is not None:
        if not 0.0 < a.ds_offload_ratio <= 1.0:
            raise PeerError("--ds-offload-ratio must be in (0, 1]")
        zero["offload_optimizer"]["ratio"] = float(a.ds_offload_ratio)
    if a.ds_layer_sized:
        if layer < 1:
            raise PeerError("--ds-layer-sized needs the model's layer size")
        zero["stage3_prefetch_bucket_size"] = int(layer)
        zero["stage3_max_live_parameters"] = max(int(1e9), 3 * int(layer))  # DeepSpeed's default, or 3 layers
        zero["stage3_param_persistence_threshold"] = 10 * hidden_size
    if a.ds_hf_auto:
        zero["reduce_bucket_size"] = hidden_size * hidden_size
        zero["stage3_prefetch_bucket_size"] = int(0.9 * hidden_size * hidden_size)
        zero["stage3_param_persistence_threshold"] = 10 * hidden_size
    knobs = {
        "stage3_prefetch_bucket_size": a.ds_prefetch_bucket,
        "stage3_max_live_parameters": a.ds_max_live,
        "stage3_max_reuse_distance": a.ds_max_reuse,
        "stage3_param_persistence_threshold": a.ds_persistence_threshold,
        "reduce_bucket_size": a.ds_reduce_bucket,
        "sub_group_size": a.ds_sub_group,
    }
    for k, v in knobs.items():
        if v is not None:
            zero[k] = int(v)
    cfg = {
        "train_batch_size": a.batch,
        "train_micro_batch_size_per_gpu": a.batch,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": common.GRAD_CLIP,
        "bf16": {"enabled": a.precision == "mixed"},
        "zero_optimization": zero,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }
    if a.torch_adam:
        cfg["zero_force_ds_cpu_optimizer"] = False
    return cfg


def system_name(a) -> str:
    """deepspeed_zero3 for every configuration of DeepSpeed with its CPU Adam (its knobs are
    the user's: the row's `ds` says which were set, and a claim takes the fastest); the
    torch-AdamW fallback is another system, never the baseline."""
    return PROG + "_torchadam" if a.torch_adam else PROG


def cpu_threads(a) -> dict:
    """CPU Adam's threads and cores (before torch is imported: OpenMP reads OMP_NUM_THREADS
    when it starts): --ds-threads, else the environment's OMP_NUM_THREADS, else every core this
    process may run on (OpenMP's own default); the process bound to the first that many with
    --ds-bind-cores. What the row records as ds.cpu_adam."""
    cores = sorted(os.sched_getaffinity(0))
    env_n = os.environ.get("OMP_NUM_THREADS", "")
    n = a.ds_threads or (int(env_n) if env_n.isdigit() and int(env_n) > 0 else len(cores))
    if n < 1 or n > len(cores):
        raise PeerError("--ds-threads %d: this process may run on %d cores" % (n, len(cores)))
    if a.ds_bind_cores:
        cores = cores[:n]
        os.sched_setaffinity(0, cores)
    os.environ["OMP_NUM_THREADS"] = str(n)
    return {"threads": n, "bound": bool(a.ds_bind_cores), "cores": _ranges(cores)}


def _ranges(cores) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (as taskset and numactl write them)."""
    out, start = [], None
    for i, c in enumerate(cores):
        if start is None:
            start = c
        if i + 1 == len(cores) or cores[i + 1] != c + 1:
            out.append(str(start) if start == c else "%d-%d" % (start, c))
            start = None
    return ",".join(out)


def ds_fields(a, cfg: dict, cpu: dict, layers_run: int, recomputed: int) -> dict:
    """The row's account of this DeepSpeed: every zero_optimization knob it ran with
    (DeepSpeed's defaults for the rest), its CPU Adam's threads and cores, whether
    activation checkpointing was on, and the work it did beside ours (work_fields)."""
    out = {"ds": {"zero_optimization": cfg["zero_optimization"], "cpu_adam": cpu,
                  "activation_checkpointing": not a.no_checkpointing}}
    out.update(common.work_fields(layers_run, recomputed, 1 if a.ce_keep_logits else 2))
    return out


def load_cpu_adam_op() -> None:
    """Builds/loads DeepSpeed's cpu_adam op now, so that a missing compiler is
    one clear line and not a traceback deep inside deepspeed.initialize."""
    try:
        from deepspeed.ops.op_builder import CPUAdamBuilder
        CPUAdamBuilder().load(verbose=False)
    except Exception as e:  # noqa: BLE001 - any failure means the op is unusable
        cause = e.__cause__ or e
        msg = " ".join(str(cause).split())[:300] or type(cause).__name__
        print("%s: cannot load DeepSpeed's CPU Adam op (JIT build needs g++, ninja, Python.h and "
              "torch's headers; see baselines/peers/README.md): %s" % (PROG, msg),
              file=sys.stderr, flush=True)
        sys.exit(EXIT_NO_OP)


def setup(a, spec, dist_backend: str = "nccl", timings=None, info=None):
    """init_distributed, the model under zero.Init, per-layer checkpointing, the
    loss wrapper, the optimizer and deepspeed.initialize. Returns (engine, N_all).
    `timings` (a dict) gets model_build_s and engine_init_s; `info` (a dict) the config
    (cfg) and the layers recomputed (recomputed).
    (The tests call this with DS_ACCELERATOR=cpu and gloo.)"""
    import time
    import torch
    import deepspeed
    timings = {} if timings is None else timings
    t = time.time()
    deepspeed.init_distributed(dist_backend=dist_backend, auto_mpi_discovery=False)
    cfg = ds_config(a, spec.config.hidden_size, layer_params(spec.config))
    log("%s: deepspeed %s, config %s" % (PROG, deepspeed.__version__, json.dumps(cfg)))

    from transformers.integrations.deepspeed import HfDeepSpeedConfig
    dtype = torch.bfloat16 if a.precision == "mixed" else torch.float32
    _KEEP_ALIVE.append(HfDeepSpeedConfig(cfg))  # HF reads it through a weak reference
    log("%s: building %s (%d of %d layers) under zero.Init" % (PROG, spec.name, spec.layers_run,
                                                               spec.layers_model))
    model = common.build_model(spec, dtype=dtype, seed=a.seed)
    n_params = common.count_params(model)
    recomputed = 0 if a.no_checkpointing else common.checkpoint_each_layer(model, keep_last=not a.checkpoint_last)
    loss_model = common.make_loss_model(model, a.ce_chunk, recompute_head=not a.ce_keep_logits)
    timings["model_build_s"] = time.time() - t  # init_distributed and zero.Init's partitioning included
    t = time.time()

    groups = common.adamw_param_groups(loss_model.parameters())
    if a.torch_adam:
        opt = torch.optim.AdamW(groups, lr=common.LR, betas=(common.BETA1, common.BETA2), eps=common.EPS)
    else:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        opt = DeepSpeedCPUAdam(groups, lr=common.LR, betas=(common.BETA1, common.BETA2), eps=common.EPS,
                               weight_decay=common.WEIGHT_DECAY, adamw_mode=True)
    engine, _, _, _ = deepspeed.initialize(model=loss_model, optimizer=opt, config=cfg)
    engine.train()
    timings["engine_init_s"] = time.time() - t
    log("%s: %d parameters (N_all), precision %s, ce chunk %d" % (PROG, n_params, a.precision, a.ce_chunk))
    if info is not None:
        info.update(cfg=cfg, recomputed=recomputed)
    return engine, n_params


def make_step(engine, phases=None):
    """One DeepSpeed step: forward, engine.backward (ZeRO-3 reduces and offloads
    gradients), engine.step (clipping + CPU Adam + bf16 copy back). With `phases`
    (common.Phases, a --phases run) each of the three is timed: fwd_ms, bwd_ms, optimizer_ms."""
    def mark(name):
        if phases is not None:
            phases.mark(name)

    def step(x, y):
        if phases is not None:
            phases.start()
        loss = engine(x, y)
        mark("fwd_ms")
        engine.backward(loss)
        mark("bwd_ms")
        engine.step()
        mark("optimizer_ms")
        return loss, engine.get_global_grad_norm()
    return step


def main(argv=None) -> int:
    a = parse_args(argv)
    cpu = cpu_threads(a)  # before torch: OpenMP reads its thread count when it starts
    import torch
    if not torch.cuda.is_available():
        raise PeerError("no CUDA device visible")
    try:
        import deepspeed  # noqa: F401
    except ImportError as e:
        raise PeerError("deepspeed is not importable (%s); carry it as a wheel (baselines/peers/fetch_wheels.sh)" % e)
    spec = common.load_config(a.config, a.layers)
    batches = common.TokenBatches(a.data, a.batch, a.seq_len, spec.config.vocab_size, seed=a.seed)
    # bf16 param 2 + fp32 master 4 + fp32 m, v 8 + fp32 grad partition 4 (fp32 mode: 4 + 4 + 8 + 4)
    common.check_host_budget(common.count_params_meta(spec), 18 if a.precision == "mixed" else 20,
                             "ZeRO-3 offload of %s (%d layers)" % (spec.name, spec.layers_run))
    timings = {"imports_s": time.time() - common.T0}  # torch, deepspeed, transformers' config
    if not a.torch_adam:
        log("%s: building/loading DeepSpeed's cpu_adam op (first use JIT-compiles, ~1 min)" % PROG)
        t = time.time()
        load_cpu_adam_op()
        timings["cpu_adam_load_s"] = time.time() - t

    common.setup_single_rank_env()
    torch.cuda.set_device(0)
    info = {}
    engine, n_params = setup(a, spec, dist_backend="nccl", timings=timings, info=info)
    torch.cuda.reset_peak_memory_stats()

    device = torch.device("cuda", 0)
    phases = common.Phases(device) if a.phases else None
    extras = ds_fields(a, info["cfg"], cpu, spec.layers_run, info["recomputed"])
    log("%s: CPU Adam %d threads on cores %s%s" % (PROG, cpu["threads"], cpu["cores"],
                                                   " (bound)" if cpu["bound"] else ""))
    common.run_and_report(a, PROG, system_name(a), spec, n_params, make_step(engine, phases), batches, device,
                          phases, timings, extras)
    try:
        engine.destroy()
    except Exception:  # noqa: BLE001 - teardown only
        pass
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    common.main_guard(main, PROG)
