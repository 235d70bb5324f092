"""parts.py: what each part of the GPU campaign runs, in priority order.

A part is one call of the device tool: a bare machine, at most 10 minutes a command,
so each part finishes under 9 (runner.PART_BUDGET_S) and packs what it made into at
most 8 files. A lent session has 15 minutes of device time in all, so it runs one part,
or what `gpu_campaign.sh next` fits in one call (`--list` groups the parts into sessions
and says how each estimate is made).

A step is a dict: `name`, `kind`, `timeout_s` (its own limit: a hang costs the step,
not the part), and per kind:
  machine     nvidia-smi, free -g, megatrain --version, mt-env          (allow_s)
  test        BIN/<argv>; `env`, `dry_env` (the CPU variant's env)       (allow_s)
  microbench  mt-microbench over `filter` (Google Benchmark regex); `calibrate`: the
              profile of this GPU (h100-128g / h200-128g) from it; `families`: what a
              filed run must hold, else `next` runs it again (main.py)     (allow_s)
  sweep       harness/sweep/run.py on `sweep` (estimated from its configurations)
  peers       the wheels in .whl/ installed, then side by side, each timed: DeepSpeed's CPU
              Adam op built and `official` (the official code's prepare: its extension,
              its model); what failed or was skipped is not run by the sweeps (allow_s)
  cpu_adam    baselines/peers/cpu_optimizers.py --layouts: ours vs DeepSpeedCPUAdam, each
              in its own state layout, 4x the LLC, the triad beside, rows kept (allow_s)
  lab         BIN/lab/<argv>, JSON lines kept as `keep`                   (allow_s)
  labs        each of BIN/lab/<labs> in turn, the output kept as `keep`   (allow_s)
  torch       python3 <argv> (needs torch with CUDA), JSON lines kept     (allow_s)
  attention_profile  the profile of this GPU with the attention tables the lab and
              torch steps before it measured (calibrate_profile.py --attention) (allow_s)
  sanitizer   compute-sanitizer --tool <tool> BIN/test_backend_ops --backend cuda --no-deliberate-errors
A part marked `alone` runs by itself in its call of `next` (C2a and C2b: the two calls of one
lease, the second named explicitly: `gpu_campaign.sh C2b`, since nothing is filed between them);
a sweep step's `where` runs part of its sweep (step_keys), so that both calls write one experiment.
`allow_s` is what the step took on the H200 leases (2026-11-25/26 summaries) where it ran
there, an allowance (seconds) where it has not. Sweep steps are estimated from their
configurations' `expect_s` (measured wall times) or `megatrain plan` (estimate.py). A part's
`budget_s` (default runner.PART_BUDGET_S) bounds its steps and packing: its sweep stops
before a configuration that no longer fits and lists it as not reached.
"""

# What each step took on the lent H200s (part B's summary of 2026-11-26, "measured"), or
# an allowance for steps whose length no model predicts. Each is below its step's timeout.
ALLOW_MACHINE = 1         # measured 0.7 s: nvidia-smi, free, --version, mt-env
ALLOW_CUDNN_GRAPH = 10    # finalizes a few cuDNN graphs (0.2 s on the dev VM, no GPU)
ALLOW_CUDA_OPS = 60       # the op table on cuda (f32, bf16, cuDNN, its variants) vs double references (T <= 1000)
ALLOW_PARITY = 30         # tiny Llama/Qwen2/Qwen3 x 2 precisions x G=1,2 (5 s on the dev VM's CPU)
ALLOW_MICROBENCH = 100    # ~48 benchmarks at --benchmark_min_time=0.2 (copies 1 MiB..1 GiB, GEMMs, AdamW), + 25 s
                          # allowed (not measured) for the 5 backward GEMMs, the 7 memory-bound kernels and the 4
                          # attention shapes at 14B shapes (host fill of up to 470M values and a 0.9 GB copy
                          # each, then 0.2 s timed); the drain's sum of squares (a 1.2 GB fill on the H200
                          # host, then 0.2 s) within the margin; so are launch/cuda (15 x 1000 one-element adds)
                          # and host_contention/cuda (AdamW's fill, 15 passes of 4x the LLC, 0.2 s of copies)
ALLOW_COPYBENCH = 4       # measured 3.7 s and 2.0 s (2026-11-26, two leases): pinned copies only (3 at 1 GiB)
ALLOW_CALIBRATE = 5
ALLOW_PEERS_SETUP = 62    # measured 61.6 s (2026-11-26, bundle 955be61): pip 1.2 s, then DeepSpeed's
                          # CPU Adam JIT build (39.8 s) beside the official prepare (60.4 s)
ALLOW_OFFICIAL_PREP = 60  # measured 60.4 s (2026-11-26): wheels 1.0 s, cpu_adam 20.5 s, the
                          # 14B-width 8-layer model written 19.5 s; beside the JIT build
OFFICIAL_PREP_TIMEOUT = 120  # past this the official configurations are not run
ALLOW_CPU_ADAM = 24       # measured 23.2 s (2026-11-26): 104.9M params (4x the 300 MB L3), 3 rounds
ALLOW_ATTN_LAB = 60       # native vs cuDNN, fwd+bwd at 1k..128k (28 heads)
ALLOW_TORCH_REF = 55      # PyTorch: the 7B layer GEMMs (12 products at 16k tokens) and SDPA at
                          # 1k..128k with its default, cuDNN and flash backends
ALLOW_LABS = 60           # the 8 kernel labs: each version vs a CPU reference, timed
ALLOW_SANITIZER = 180     # test_backend_ops --backend cuda under memcheck / racecheck (10-100x slower kernels)

# Part A's benchmark families (mt-microbench names: FAMILY/...). A filed part A whose microbench
# lacks one of them (added since it ran) is completed by `next`: its microbench runs again.
MICROBENCH_FAMILIES = ("copy/cuda", "gemm/cuda", "gemm_bwd/cuda", "kernel/cuda", "attention/cuda", "layer/cuda",
                       "adamw", "grad_sumsq", "triad", "memcpy", "launch/cuda",
                       "host_contention/cuda")
MICROBENCH_FILTER = "^(" + "|".join(MICROBENCH_FAMILIES) + ")/"
COPYBENCH_FILTER = "^copy/cuda/pinned/.*/1073741824/"
DRY_MICROBENCH_FILTER = "^(triad|adamw/paper|grad_sumsq|copy/cuda/pinned/h2d/1048576|launch/cpu|host_contention/cpu)/"


def machine():
    return {"name": "machine", "kind": "machine", "timeout_s": 60, "allow_s": ALLOW_MACHINE,
            "basis": "measured 0.7 s (2026-11-26 part B)"}


def gpu_tests():
    return [
        {"name": "test_cudnn_graph", "kind": "test", "argv": ["test_cudnn_graph"], "timeout_s": 60,
         "allow_s": ALLOW_CUDNN_GRAPH},
        {"name": "test_backend_ops_cuda", "kind": "test", "argv": ["test_backend_ops", "--backend", "cuda"], "timeout_s": 240,
         "env": {"MT_REQUIRE_CUDNN": "1", "MT_TEST_VERBOSE": "1"}, "allow_s": ALLOW_CUDA_OPS},
        {"name": "test_torch_parity_cuda", "kind": "test", "argv": ["test_torch_parity"], "timeout_s": 180,
         "env": {"MT_PARITY_BACKEND": "cuda"}, "dry_env": {"MT_PARITY_BACKEND": "cpu"}, "allow_s": ALLOW_PARITY},
    ]


def sweep(path, timeout_s, where=None):
    """A sweep step; `where` ({field: [values]}, as a claim's): only the sweep's configurations
    that match it (step_keys), so that two parts can run one experiment's sweep in halves."""
    name = path.rsplit("/", 1)[-1].removesuffix(".json")
    st = {"name": name, "kind": "sweep", "sweep": path, "timeout_s": timeout_s}
    if where:
        st["where"] = where
    return st


def step_keys(st, expand):
    """The config keys a sweep step runs: those of its sweep's configurations matching its
    `where` (expand: path -> [(key, configuration)], the sweep's expansion); None: all."""
    if not st.get("where"):
        return None
    ok = lambda c: all(c.get(k) in (v if isinstance(v, list) else [v]) for k, v in st["where"].items())
    return [k for k, c in expand(st["sweep"]) if ok(c)]


C2_MODEL = "experiments/models/qwen2.5-14b.json"
C2_LAYERS = 8
C2_BUDGET_S = 390  # the part's steps and packing: with the measured 30 s start, 7 minutes


def peers_setup():
    return {"name": "peers_setup", "kind": "peers", "timeout_s": 180,
            "allow_s": max(ALLOW_PEERS_SETUP, ALLOW_OFFICIAL_PREP),
            # the official code's prepare, beside the JIT build (baselines/peers/megatrain_official.py)
            "official": {"script": "baselines/peers/megatrain_official.py", "config": C2_MODEL,
                         "layers": C2_LAYERS, "timeout_s": OFFICIAL_PREP_TIMEOUT,
                         # the sweeps' seed (harness/sweep/sweeps.py DEFAULTS): the prepared model is
                         # cached by seed, and the sweep's run must find the one prepared here
                         "seed": 1}}


ALLOW_DS_SETUP = 41  # measured (2026-11-26): pip 1.2 s, DeepSpeed's CPU Adam JIT build 39.8 s
C2_SWEEP = "experiments/sweeps/gpu_c2_matched.json"
# Each C2 call's steps and packing: with the 30 s start and 5 s packing, 6 and 7 minutes; the two
# calls 13 of a 15-minute lease (the rest: the transfers and the wait between the calls).
C2A_BUDGET_S, C2B_BUDGET_S = 340, 410


def ds_setup():
    """peers_setup for DeepSpeed alone: the wheels and its CPU Adam op (no official code)."""
    return {"name": "peers_setup", "kind": "peers", "timeout_s": 120, "allow_s": ALLOW_DS_SETUP,
            "basis": "measured 41 s (2026-11-26): pip 1.2 s + the cpu_adam JIT build 39.8 s"}


def cpu_adam():
    return {"name": "cpu_adam", "kind": "cpu_adam", "timeout_s": 60, "allow_s": ALLOW_CPU_ADAM,
            "basis": "allowance: imports + 3 rounds over 4x the LLC (not yet run on a GPU host)",
            "keep": "cpu_adam.jsonl"}


def copybench():
    return {"name": "copybench", "kind": "microbench", "filter": COPYBENCH_FILTER, "min_time": 0.2,
            "calibrate": False, "timeout_s": 90, "allow_s": ALLOW_COPYBENCH, "basis": "measured 3.7 s (2026-11-26 part B)"}


PARTS = [
    {"name": "C2a",
     "what": "C2 matched (issue 37), first call: batch 16, both mixed, one timing rule: megatrain mixed vs "
             "DeepSpeed ZeRO-3 offload tuned by its guidance (layer-sized prefetch, CPU Adam bound to 16 cores, "
             "no activation checkpointing, logits kept), its defaults, and ZeRO-Offload++ ratio 0.5; megatrain "
             "with and without its own split (--device-optimizer auto, issue 44)",
     "budget_s": C2A_BUDGET_S, "alone": True,
     "steps": [machine(), ds_setup(), sweep(C2_SWEEP, 300, where={"batch": [16]})]},
    {"name": "C2b",
     "what": "C2 matched, second call: batch 64 and up, both mixed: megatrain mixed vs DeepSpeed tuned at 64, "
             "megatrain with its split at 64, "
             "DeepSpeed tuned at 128; then as far as the call goes (the rest `next` runs later): megatrain at "
             "128, DeepSpeed at 256 (the largest our model of its memory fits), its defaults at 64, megatrain at 256",
     "budget_s": C2B_BUDGET_S, "alone": True,
     "steps": [machine(), ds_setup(), sweep(C2_SWEEP, 370, where={"batch": [64, 128, 256]})]},
    {"name": "A",
     "what": "CUDA op tests (cuDNN required) and whole-model parity on CUDA; microbenchmarks "
             "(pinned/pageable/bidirectional copies, GEMM forward and backward, memory-bound kernels, attention at "
             "the model's batch, layer, AdamW, the drain's sum of squares, triad, launch latency and the "
             "shortest kernel, a weight copy beside AdamW) -> the calibrated "
             "profile; Qwen2.5-7B full depth at batch 158 in paper precision (the 400 TFLOPS goal, "
             "GPU busy, MFU, H2D vs pinned)",
     "steps": [machine()] + gpu_tests() + [
         {"name": "microbench", "kind": "microbench", "filter": MICROBENCH_FILTER, "families": MICROBENCH_FAMILIES,
          "min_time": 0.2, "calibrate": True, "timeout_s": 180, "allow_s": ALLOW_MICROBENCH + ALLOW_CALIBRATE},
         sweep("experiments/sweeps/gpu_goal.json", 400)]},
    {"name": "V",
     "what": "the sim's validation on the current engine (issue 41): the configurations make sim-check compares "
             "that were measured before the engine the sim models, measured again: Qwen2.5-7B full depth at "
             "batch 158, and the long-context rows (Qwen2.5-3B width 4k..256k, Qwen2.5-7B width 4k, 16k, 64k; "
             "2 layers, 64k tokens a step), traces kept",
     "steps": [machine(), sweep("experiments/sweeps/gpu_revalidate.json", 480)]},
    {"name": "W",
     "what": "C1 and C3 at their own width, reduced depth (issue 45): dense-120b at 1, 2 and 3 of 96 layers, batch "
             "16 x 1024, paper precision (fit on 1 and 2, 3 held out), then Qwen2.5-7B width at 524288 tokens in one "
             "step at 1 and 2 of 28 layers (no depth held out: the bar is the fit's noise); each extrapolated to full "
             "depth, each depth's H2D and host AdamW kept",
     "steps": [machine(), sweep("experiments/sweeps/gpu_width.json", 480)]},
    {"name": "B",
     "what": "C2 at 14B width (8 of 48 layers), in 7 minutes: megatrain (paper, and mixed at b16) vs the "
             "real DeepSpeed ZeRO-3 offload, the official MegaTrain code and FSDP2 offload, b16 then b64, "
             "per-phase timings; host AdamW ours vs DeepSpeedCPUAdam at 16 threads; pinned copy rate",
     "budget_s": C2_BUDGET_S,
     "steps": [machine(), copybench(), peers_setup(), cpu_adam(),
               sweep("experiments/sweeps/gpu_c2_deepspeed.json", 420)]},
    {"name": "I",
     "what": "600 TFLOPS (issue 27): Qwen2.5-7B full depth, paper precision, at the batch `train --batch auto` "
             "picks on the lent machine (the batch and knobs chosen recorded in the row)",
     "steps": [machine(), sweep("experiments/sweeps/gpu_auto.json", 300)]},
    {"name": "C",
     "what": "long context: Qwen2.5-3B width 4k..256k tokens and Qwen2.5-7B width 4k..128k (2 layers "
             "each, 64k tokens a step); attention fwd+bwd 1k..128k native vs cuDNN vs PyTorch SDPA; the "
             "layer GEMMs vs PyTorch's cuBLAS",
     "steps": [machine(), copybench(),
               sweep("experiments/sweeps/gpu_context.json", 390),
               {"name": "attention_lab", "kind": "lab", "argv": ["attention", "--sweep", "28", "4", "128"],
                "keep": "attention_sweep.jsonl", "timeout_s": 150, "allow_s": ALLOW_ATTN_LAB},
               {"name": "torch_reference", "kind": "torch",
                "argv": ["megatrain/backends/cuda/lab/torch_reference.py"],
                "keep": "torch_reference.jsonl", "timeout_s": 150, "allow_s": ALLOW_TORCH_REF},
               {"name": "attention_profile", "kind": "attention_profile",
                "rows": ["attention_sweep.jsonl", "torch_reference.jsonl"], "timeout_s": 30,
                "allow_s": ALLOW_CALIBRATE}]},
    {"name": "E",
     "what": "the ablations at 7B width (8 of 28 layers), batch 16: C4 GPU busy, C5 pointer vs copy "
             "bind, buffers, checkpoint interval, serial optimizer, gradient slabs, attention (cuDNN vs native), naive and zero3",
     "steps": [machine(), sweep("experiments/sweeps/gpu_ablations.json", 420)]},
    {"name": "F",
     "what": "C2 at 14B full depth, extrapolated: megatrain vs our zero3 schedule at batch 16 and 64 "
             "(fit on 4 and 8 layers, 2 held out for the error bar)",
     "steps": [machine(), sweep("experiments/sweeps/gpu_c2.json", 450)]},
    {"name": "H",
     "what": "the bound at every batch: Qwen2.5-7B and 14B width (8 layers each), batch 8 to 158, "
             "step / max(compute, H2D, host AdamW), each beside its projection (bound_h200); at batch 16 "
             "also with --embedding-rows-first false",
     "steps": [machine(), sweep("experiments/sweeps/gpu_bound.json", 540)]},
    {"name": "G",
     "what": "compute-sanitizer memcheck and racecheck of the CUDA op tests (deliberate API errors "
             "excluded); the kernel labs (each kernel's versions vs a CPU reference, timed)",
     "steps": [machine()] + [
         {"name": f"sanitizer_{tool}", "kind": "sanitizer", "tool": tool, "timeout_s": 240,
          "allow_s": ALLOW_SANITIZER} for tool in ("memcheck", "racecheck")] + [
         {"name": "kernel_labs", "kind": "labs", "labs": ["rmsnorm", "add_rmsnorm", "elementwise", "xent", "rope",
                                                          "swiglu", "embedding", "attention"],
          "keep": "kernel_labs.txt", "timeout_s": 120, "allow_s": ALLOW_LABS}]},
]


def by_name(name):
    for p in PARTS:
        if p["name"] == name:
            return p
    return None
