#!/usr/bin/env python3
"""stage3_hooks.py: the host time DeepSpeed ZeRO-3's and FSDP2's per-module machinery adds, measured on this CPU.

    python3 -m baselines.peers.stage3_hooks [--depths 2,8] [--rounds 7] [--steps 10] [--threads 1]
        [--bin build/bin] [--out results/peer_hooks.jsonl]

One process, world size 1 (gloo, env:// on 127.0.0.1), DeepSpeed on its CPU accelerator
(DS_ACCELERATOR=cpu). The same tiny Llama-shaped model (hidden 64, so compute is small next to
the hooks) runs three ways, each decoder layer checkpointed (checkpoint_wrapper, the peers'
recipe), bf16 compute:
  torch            the plain model in bf16: the reference
  deepspeed-zero3  deepspeed.initialize with the peer's own config (deepspeed_zero3.ds_config:
                   stage 3, offload_param and offload_optimizer to the cpu, overlap_comm,
                   contiguous_gradients, bf16), DeepSpeedCPUAdam as its optimizer (never stepped)
  fsdp2-offload    fully_shard per decoder layer and the root on a CPU mesh,
                   MixedPrecisionPolicy(bf16, fp32 reduce), CPUOffloadPolicy(pin_memory=False):
                   pinning needs an NVIDIA driver, which this machine lacks
Two passes are timed: fwd_bwd (forward, backward: engine.backward for DeepSpeed, then the
torch runs' zero_grad) and fwd (forward under no_grad). No optimizer step: it is priced
elsewhere (cpu_optimizers.py).

Each round times every (system, depth, pass) for --steps steps (the median step is the
round's figure), in an order rotated per round, so load on a shared machine falls on all
alike. Per round: D(L) = step(system, L) - step(torch, L), and the hook time per layer is the
slope (D(Lb) - D(Ls)) / (Lb - Ls): what the embedding, head and root modules cost drops out.
That figure, divided by
  * the framework's own calls per layer (DeepSpeed's PartitionedParameterCoordinator.
    fetch_sub_module, FSDP2's FSDPParamGroup.unshard; counted in one untimed step per
    depth) gives ms_per_call;
  * the fetches our model charges per layer (megatrain/engine/peer.c; the planner's
    hook_ms): DeepSpeed 6 submodules (mt_layout_submodules of a Llama layer: ln1 | q k v |
    o | ln2 | gate up | down) x 2 loads (forward; backward's recompute) = 12, forward only
    6; FSDP2 one fetch per layer x 2 loads = 2, forward only 1) gives fetch_overhead_ms,
    the figure the peer descriptors carry. Medians over rounds, min and max beside them.

Writes one row per (system, pass) to --out (rewritten whole), also on stdout. Exit 77
(skipped) when torch or deepspeed cannot be imported; 2 for a bad command line; 1 with one
line on stderr for anything else. Progress on stderr.
"""
import argparse
import contextlib
import io
import os
import statistics
import sys
import time

from . import common  # first (T0): log, skip, the load average, the env block; stdlib only
from harness.resultslib import spread as stats  # median, min, max

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCHEMA = "megatrain.peer_hooks/1"
PROG = "stage3_hooks"
SYSTEMS = ("torch", "deepspeed-zero3", "fsdp2-offload")
PASSES = ("fwd_bwd", "fwd")
# A Llama layer's fetches as megatrain's peer models count them (megatrain/model/layout.c,
# mt_layout_submodules: ln1 | q k v | o | ln2 | gate up | down; no biases, no q/k norms),
# and the loads each piece takes per step in those models (forward; the backward's
# recompute, which the backward itself reuses): predict.c's hooked() terms.
MODEL_FETCHES = {("deepspeed-zero3", "fwd_bwd"): 6 * 2, ("deepspeed-zero3", "fwd"): 6,
                 ("fsdp2-offload", "fwd_bwd"): 1 * 2, ("fsdp2-offload", "fwd"): 1}
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=256, max_position_embeddings=256, use_cache=False)



class Counter:
    """Counts calls of cls.name while active (a wrapper in place of the method)."""

    def __init__(self, cls, name):
        self.cls, self.name, self.n = cls, name, 0
        self.orig = getattr(cls, name)

    def __enter__(self):
        orig, me = self.orig, self

        def counted(*a, **k):
            me.n += 1
            return orig(*a, **k)
        setattr(self.cls, self.name, counted)
        return self

    def __exit__(self, *exc):
        setattr(self.cls, self.name, self.orig)


def build(torch, system, layers, batch, seq):
    """(module to call, zero_grad or None, the layer module list) for one system at one depth."""
    from transformers import LlamaConfig, AutoModelForCausalLM
    cfg = LlamaConfig(num_hidden_layers=layers, **TINY)
    torch.manual_seed(0)
    dtype = torch.float32 if system == "fsdp2-offload" else torch.bfloat16  # FSDP2 keeps fp32 shards
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    common.checkpoint_each_layer(model)
    lm = common.make_loss_model(model, 4096)
    layer_list = common.decoder_layers(model)
    if system == "torch":
        return lm, lambda: lm.zero_grad(set_to_none=True), layer_list
    if system == "fsdp2-offload":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
        kw = {"mesh": init_device_mesh("cpu", (1,)),
              "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
              "offload_policy": CPUOffloadPolicy(pin_memory=False)}
        for layer in layer_list:
            fully_shard(layer, **kw)
        fully_shard(lm, **kw)
        return lm, lambda: lm.zero_grad(set_to_none=True), layer_list
    import deepspeed
    from . import deepspeed_zero3 as dz
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    a = dz.parse_args(["--config", "tiny.json", "--batch", str(batch), "--seq-len", str(seq)])
    ds_cfg = dz.ds_config(a, TINY["hidden_size"])
    opt = DeepSpeedCPUAdam(common.adamw_param_groups(lm.parameters()), lr=common.LR,
                           betas=(common.BETA1, common.BETA2), eps=common.EPS, adamw_mode=True)
    with contextlib.redirect_stdout(io.StringIO()):  # stdout carries JSON lines only
        engine, _, _, _ = deepspeed.initialize(model=lm, optimizer=opt, config=ds_cfg)
    if engine.zero_optimization_stage() != 3 or not engine.zero_offload_param():
        raise SystemExit(f"{PROG}: DeepSpeed did not take stage 3 with offload_param (stage "
                         f"{engine.zero_optimization_stage()}, offload_param {engine.zero_offload_param()})")
    engine.train()
    return engine, None, layer_list


def step_fn(torch, system, mod, zero_grad, pss, x, y):
    if pss == "fwd":
        def f():
            with torch.no_grad():
                mod(x, y)
        return f
    if system == "deepspeed-zero3":
        def f():
            mod.backward(mod(x, y))
        return f

    def f():
        mod(x, y).backward()
        zero_grad()
    return f


def median_ms(f, steps):
    t = []
    for _ in range(steps):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--depths", default="2,8", help="two layer counts Ls,Lb (default 2,8)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--steps", type=int, default=10, help="steps per (system, depth, pass) per round")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps of each before the rounds")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for every system (default 1)")
    ap.add_argument("--bin", default=os.environ.get("MT_BIN", os.path.join(ROOT, "build", "bin")))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "peer_hooks.jsonl"))
    a = ap.parse_args()
    try:
        depths = [int(v) for v in a.depths.split(",")]
    except ValueError:
        depths = []
    if len(depths) != 2 or not 1 <= depths[0] < depths[1] or a.rounds < 1 or a.steps < 1 or a.warmup < 0 \
            or a.batch < 1 or a.seq_len < 1 or a.threads < 1:
        print(f"{PROG}: --depths Ls,Lb with 1 <= Ls < Lb; --rounds, --steps, --batch, --seq-len, --threads >= 1; "
              "--warmup >= 0", file=sys.stderr)
        return 2
    try:
        common.check_out(a.out, [])  # a file, not a folder: checked before minutes of rounds
    except common.PeerError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    os.environ["DS_ACCELERATOR"] = "cpu"
    try:
        import torch
    except ImportError as e:
        common.skip(PROG, f"torch not importable ({e}); CI does not install the peers' environment")
    try:
        import deepspeed
        import transformers  # noqa: F401
        from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator
        from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
    except Exception as e:  # noqa: BLE001 - any import failure means: not here
        common.skip(PROG, f"deepspeed, transformers or FSDP2 not importable ({type(e).__name__}: {e})")
    torch.set_num_threads(a.threads)
    os.environ.setdefault("MT_BIN", a.bin)
    try:
        env = common.collect_env()
    except common.PeerError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    common.setup_single_rank_env()
    with contextlib.redirect_stdout(io.StringIO()):
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)

    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, TINY["vocab_size"], (a.batch, a.seq_len), generator=g)
    y = torch.randint(0, TINY["vocab_size"], (a.batch, a.seq_len), generator=g)
    counted = {"deepspeed-zero3": (PartitionedParameterCoordinator, "fetch_sub_module"),
               "fsdp2-offload": (FSDPParamGroup, "unshard")}
    fns, calls, modules = {}, {}, {}
    t0 = time.time()
    for s in SYSTEMS:
        for L in depths:
            mod, zg, layers = build(torch, s, L, a.batch, a.seq_len)
            modules[(s, L)] = len(list(layers[0].modules()))
            for p in PASSES:
                f = fns[(s, L, p)] = step_fn(torch, s, mod, zg, p, x, y)
                for _ in range(a.warmup):
                    f()
                if s in counted:
                    with Counter(*counted[s]) as c:
                        f()
                    calls[(s, L, p)] = c.n
    common.log(f"{PROG}: built and warmed {len(SYSTEMS)} systems x depths {depths} in {time.time() - t0:.1f} s; "
        f"{a.rounds} rounds of {a.steps} steps, {a.threads} thread(s)")

    keys = list(fns)
    rounds, load = [], [common.load_avg()]
    for r in range(a.rounds):
        k = r % len(keys)
        order = keys[k:] + keys[:k]
        rounds.append({key: median_ms(fns[key], a.steps) for key in order})
        load.append(common.load_avg())
        common.log(f"  round {r + 1}/{a.rounds}: " + ", ".join(
            f"{s} L{L} {p} {rounds[-1][(s, L, p)]:.2f} ms" for s, L, p in keys))

    torch.distributed.destroy_process_group()
    Ls, Lb = depths
    env_extra = {"torch": torch.__version__, "deepspeed": deepspeed.__version__,
                 "transformers": sys.modules["transformers"].__version__, "torch_threads": a.threads,
                 "load_avg_1min": [v for v in load if v is not None],
                 "where": "measured on this machine by baselines/peers/stage3_hooks.py"}
    how = {"deepspeed-zero3": "deepspeed.initialize(config=deepspeed_zero3.ds_config): stage 3, offload_param "
                              "cpu (pin_memory true), offload_optimizer cpu, overlap_comm, contiguous_gradients, "
                              "bf16; DeepSpeed's CPU accelerator, gloo, world size 1",
           "fsdp2-offload": "fully_shard per decoder layer and the root on a CPU mesh, MixedPrecisionPolicy(bf16, "
                            "reduce fp32), CPUOffloadPolicy(pin_memory=False: pinning needs an NVIDIA driver); "
                            "gloo, world size 1"}
    counter_name = {"deepspeed-zero3": "PartitionedParameterCoordinator.fetch_sub_module",
                    "fsdp2-offload": "FSDPParamGroup.unshard"}
    rows = []
    for s in SYSTEMS[1:]:
        for p in PASSES:
            cpl = (calls[(s, Lb, p)] - calls[(s, Ls, p)]) / (Lb - Ls)
            per_layer = [((rd[(s, Lb, p)] - rd[("torch", Lb, p)]) - (rd[(s, Ls, p)] - rd[("torch", Ls, p)]))
                         / (Lb - Ls) for rd in rounds]
            mf = MODEL_FETCHES[(s, p)]
            rows.append({
                "schema": SCHEMA, "system": s, "pass": p,
                "fetch_overhead_ms": statistics.median(per_layer) / mf,
                "fetch_overhead_ms_range": [min(per_layer) / mf, max(per_layer) / mf],
                "model_fetches_per_layer": mf,
                "hook_ms_per_layer": stats(per_layer),
                "calls_per_layer": cpl, "counted": counter_name[s],
                "ms_per_call": statistics.median(per_layer) / cpl if cpl > 0 else None,
                "calls_per_step": {str(L): calls[(s, L, p)] for L in depths},
                "modules_per_layer": modules[(s, Ls)],
                "step_ms": {f"{sys_}/L{L}": stats([rd[(sys_, L, p)] for rd in rounds])
                            for sys_ in ("torch", s) for L in depths},
                "how": how[s],
                "model": dict(TINY, model_type="llama", depths=depths, batch=a.batch, seq_len=a.seq_len,
                              checkpointing="every decoder layer (checkpoint_wrapper)", compute="bf16"),
                "rounds": a.rounds, "steps": a.steps, "warmup": a.warmup,
                "stat": "per round: the median step; D(L) = step(system) - step(torch); per layer = (D(Lb) - "
                        "D(Ls)) / (Lb - Ls); fetch_overhead_ms = per layer / model_fetches_per_layer; median "
                        "over rounds, min and max beside it",
                "env": dict(env, **env_extra),
            })
    common.write_jsonl(a.out, rows)
    common.log(f"{PROG}: wrote {a.out}: " + "; ".join(
        f"{r['system']} {r['pass']} {r['fetch_overhead_ms']:.4f} ms/fetch ({r['ms_per_call']:.4f} ms/call)"
        for r in rows if r["ms_per_call"] is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
