#!/usr/bin/env python3
"""PyTorch FSDP2 with CPU offload on one GPU, as a real peer of megatrain.

    python3 -m baselines.peers.fsdp2_offload --config experiments/models/qwen2.5-14b.json \
        --layers 8 --batch 16 --seq-len 1024 --out results/peers.jsonl

What runs (torch >= 2.6; written against 2.11):
  * a process group of one rank (env:// on 127.0.0.1; backend "cuda:nccl,cpu:gloo":
    gloo carries the grad-norm reduction of the CPU-resident DTensor gradients);
  * activation checkpointing per decoder layer (checkpoint_wrapper, non-reentrant),
    then fully_shard(layer) for every decoder layer, then fully_shard(root), each with
    MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) and
    CPUOffloadPolicy(pin_memory=True);
  * torch.optim.AdamW(fused=False, foreach=None): torch picks the implementation,
    which for CPU parameters is the single-tensor loop (--adam foreach / fused
    choose torch's foreach or its fused CPU kernel instead; the system name then
    says so).

What each parameter keeps (--precision mixed, the default):
  host (pinned): fp32 sharded parameter 4 B + fp32 gradient 4 B + fp32 Adam m, v 8 B
  = 16 B/param; GPU: the bf16 all-gathered copy of the layer(s) in use, the root's
  (embedding, final norm, head) bf16 copy for the whole step, activations.
  FSDP2 cannot keep bf16 parameters with fp32 moments (torch AdamW keeps its
  moments in the parameter's dtype), so the paper's 12 B/param mode is not
  available here; the row says precision "mixed".
  --precision fp32: no mixed-precision policy, fp32 compute.

Writes one results row (baselines/peers/common.py) to --out and stdout; step
progress on stderr. Exit 1 with one line on bad input.
"""

import argparse
import os
import sys
import time

from . import common
from .common import PeerError, log

PROG = "fsdp2_offload"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    common.add_common_args(ap)
    ap.add_argument("--adam", choices=["default", "foreach", "fused"], default="default",
                    help="torch AdamW implementation on the CPU shards (default: torch's choice)")
    ap.add_argument("--init-device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="where the model is materialised before sharding (auto: cuda if it fits)")
    return common.parse_common_args(ap, argv)


def apply_fsdp2(loss_model, model, precision: str, mesh=None, offload: bool = True) -> None:
    """fully_shard every decoder layer, then the root (the loss wrapper, which
    owns embedding, final norm and head). offload=False and a CPU mesh are for
    the CPU tests only."""
    import torch
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    kw = {}
    if mesh is not None:
        kw["mesh"] = mesh
    if offload:
        kw["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    if precision == "mixed":
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in common.decoder_layers(model):
        fully_shard(layer, **kw)
    fully_shard(loss_model, **kw)


def main(argv=None) -> int:
    a = parse_args(argv)
    import torch
    import torch.distributed as dist
    try:
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard  # noqa: F401
    except ImportError as e:
        raise PeerError("this torch (%s) has no FSDP2 fully_shard (%s)" % (torch.__version__, e))
    if not torch.cuda.is_available():
        raise PeerError("no CUDA device visible (FSDP2 CPU offload still computes on the GPU)")

    spec = common.load_config(a.config, a.layers)
    batches = common.TokenBatches(a.data, a.batch, a.seq_len, spec.config.vocab_size, seed=a.seed)

    timings = {"imports_s": time.time() - common.T0}
    common.setup_single_rank_env()
    torch.cuda.set_device(0)
    dist.init_process_group(backend="cuda:nccl,cpu:gloo")
    try:
        device = torch.device("cuda", 0)
        master_dtype = torch.float32  # both modes keep fp32 sharded parameters
        n_meta = common.count_params_meta(spec)
        # pinned fp32 parameter + fp32 gradient + fp32 m, v (the build's own copy is transient)
        common.check_host_budget(n_meta, 16, "FSDP2 CPU offload of %s (%d layers)" % (spec.name, spec.layers_run))
        init_dev = a.init_device
        if init_dev == "auto":
            free, _ = torch.cuda.mem_get_info()
            init_dev = "cuda" if n_meta * 4 < 0.6 * free else "cpu"
        log("%s: building %s (%d of %d layers) in fp32 on %s" % (PROG, spec.name, spec.layers_run,
                                                                 spec.layers_model, init_dev))
        t = time.time()
        model = common.build_model(spec, dtype=master_dtype, seed=a.seed, device=init_dev)
        n_params = common.count_params(model)
        recomputed = 0 if a.no_checkpointing else common.checkpoint_each_layer(model, keep_last=not a.checkpoint_last)
        loss_model = common.make_loss_model(model, a.ce_chunk, recompute_head=not a.ce_keep_logits)

        timings["model_build_s"] = time.time() - t
        t = time.time()
        apply_fsdp2(loss_model, model, a.precision, offload=True)
        if init_dev == "cuda":
            torch.cuda.empty_cache()
        timings["fsdp2_shard_s"] = time.time() - t  # fully_shard: the move to pinned host shards

        opt_kw = {"lr": common.LR, "betas": (common.BETA1, common.BETA2), "eps": common.EPS,
                  "fused": a.adam == "fused"}
        if a.adam == "foreach":
            opt_kw["foreach"] = True
        groups = common.adamw_param_groups(loss_model.parameters())
        optimizer = torch.optim.AdamW(groups, **opt_kw)
        params = [p for g in groups for p in g["params"]]
        shard_dev = {str(p.device) for p in params}
        log("%s: %d parameters (N_all), shards on %s, AdamW %s, precision %s, ce chunk %d"
            % (PROG, n_params, ",".join(sorted(shard_dev)), a.adam, a.precision, a.ce_chunk))

        loss_model.train()
        torch.cuda.reset_peak_memory_stats()

        phases = common.Phases(device) if a.phases else None

        def step(x, y):
            return common.train_step_torch(loss_model, optimizer, params, x, y, common.GRAD_CLIP, phases=phases)

        system = PROG if a.adam == "default" else "%s_%sadam" % (PROG, a.adam)
        if a.no_checkpointing:
            system += "_noac"
        common.run_and_report(a, PROG, system, spec, n_params, step, batches, device, phases, timings,
                              common.work_fields(spec.layers_run, recomputed, 1 if a.ce_keep_logits else 2))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    common.main_guard(main, PROG)
