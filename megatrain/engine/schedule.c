// schedule.c: the schedule table (schedule.h): our four schedules and the three
// peers as they run, each one row of data, and how a row takes the user's
// options. Every row runs the same layer template, loss head and optimizer, so
// all compute the same numbers; the peers differ in what they move and when.
#include "engine/schedule.h"

#include <stdio.h>
#include <string.h>

#include "model/layout.h"

mt_zero3_knobs mt_zero3_defaults(void) {
    return (mt_zero3_knobs){.pin_memory = 1, .overlap_comm = 1, .prefetch_bucket_size = 50000000LL,
                            .param_persistence_threshold = 100000LL, .reduce_bucket_size = 500000000LL,
                            .max_live_parameters = 1000000000LL};
}

// ZeRO-3: whole layers ahead as the prefetch bucket allows (at least the next
// one, whose fetch the bucket then covers only in part), bounded by the live
// parameters; the knobs choose the gradient stream and the pinning.
static void zero3_derive(mt_schedule_desc *d, const mt_config *c) {
    mt_unit_layout le, ll, lh;
    mt_layout_build(c, &le, &ll, &lh);
    long long layer = (long long)ll.numel, ahead = (d->zero3.prefetch_bucket_size + layer - 1) / layer;
    long long live = d->zero3.max_live_parameters / layer;
    if (ahead > 2) ahead = 2;
    if (ahead > live - 1) ahead = live - 1;
    if (ahead < 1) ahead = 1;
    d->weight_bufs = 1 + (int)ahead;
    d->prefetch_elems = d->zero3.prefetch_bucket_size;
    d->grads_on_compute = !d->zero3.overlap_comm;
    d->host_pinned = d->zero3.pin_memory;
}

// Host time a framework's hooks spend per fetch before the compute can be issued,
// measured (PEERS.md, "hooks"): results/peer_hooks.jsonl, rows "fwd_bwd", the median
// over 11 interleaved rounds of `~/.cache/megatrain/peers-venv/bin/python
// baselines/peers/stage3_hooks.py --rounds 11 --steps 30` on the 2-core dev VM (Intel
// Xeon, CPU only, DeepSpeed 0.19.8 on its CPU accelerator, torch 2.15), 2026-11-24.
// Each is the per-layer hook time (a tiny Llama under the framework minus plain torch,
// the slope over depths 2 and 8) divided by the fetches our model charges a layer:
// DeepSpeed 6 submodules x 2 loads (forward; the backward's recompute), FSDP2 1 x 2.
// That VM's CPU; a target host's may be faster. (Their source line: peer.h.)
#define MT_PEER_DS_HOOK_MS 0.586    // range 0.517-0.757 (0.171 ms per fetch_sub_module call, 41 a layer)
#define MT_PEER_FSDP2_HOOK_MS 0.874 // range 0.468-1.022 (0.582 ms per FSDPParamGroup.unshard, 3 a layer)

// HF's model in eager PyTorch, as DeepSpeed and FSDP2 run it (baselines/peers: the same
// model build for both): its kernels other than attention take this many times ours.
// Derived, not fitted to a step: baselines/peers/derive_eager_scale.py on DeepSpeed's
// measured forward phase at batch 16 and 64 (results/gpu_c2_deepspeed.jsonl, H200,
// 2026-11-26: 11.20 us a token between the two) less the sim's attention (1.52), over the
// sim's other forward kernels on h200-128g (7.67). Its backward (33.19 us a token
// measured) is not used: the scale predicts 29.61 (-11%). harness_test_eager_scale
// re-derives it from the rows. The official code is left at 1 until its rows exist.
#define MT_PEER_EAGER_SCALE 1.262

static const mt_schedule_desc table[] = {
    {.name = "megatrain",
     .summary = "stream layers through a ring of device buffers, checkpoint every K-th input and recompute, "
                "optimizer overlapped with the next step",
     .takes = MT_TAKES_WEIGHT_BUFS | MT_TAKES_CKPT_INTERVAL | MT_TAKES_SERIAL_OPT | MT_TAKES_OFFLOAD_CKPT |
              MT_TAKES_BIND | MT_TAKES_SPECULATIVE | MT_TAKES_RECOMPUTE | MT_TAKES_ROWS_FIRST | MT_TAKES_UPDATE_PARTS,
     .weight_bufs = 2, .prefetch_elems = -1, .ckpt_interval = 1, .host_pinned = 1,
     .optimizer_overlapped = 1, .update_parts = MT_UPDATE_PARTS},
    {.name = "resident",
     .summary = "every layer resident on the device, all activations kept, optimizer after backward (reference)",
     .takes = MT_TAKES_BIND, .weights_resident = 1, .prefetch_elems = -1, .keep_activations = 1,
     .recompute = MT_RECOMPUTE_MLP, // its backward recomputes the MLP's gate/up and SwiGLU per chunk
     .ckpt_interval = 1, .host_pinned = 1},
    {.name = "zero3",
     .summary = "DeepSpeed ZeRO-3 + CPU offload as a schedule: per-submodule fetch within a prefetch bucket, fp32 "
                "gradients out, per-layer checkpoints, CPU Adam after backward (baselines/ZERO3.md)",
     .takes = MT_TAKES_ZERO3 | MT_TAKES_BIND, .submodule_fetch = 1, .ckpt_interval = 1, .grad_wire_f32 = 1,
     .optimizer_master = 1, .host_bytes_per_param = {18, 18, 16}, .derive = zero3_derive},
    {.name = "naive",
     .summary = "one stream: copy a layer in, compute, copy its gradients out; no prefetch; optimizer after backward",
     .takes = MT_TAKES_CKPT_INTERVAL | MT_TAKES_OFFLOAD_CKPT | MT_TAKES_BIND | MT_TAKES_RECOMPUTE, .weight_bufs = 1,
     .prefetch_elems = -1, .ckpt_interval = 1, .serial_link = 1, .host_pinned = 1},

    // ---- the peers as they really run (engine/peer.h: `--peer NAME`, sim and plan only; --schedule
    // refuses them). Each row is whole: every field the peer's code fixes, sourced in baselines/PEERS.md.

    // DeepSpeed ZeRO-3 with offload_param and offload_optimizer to the CPU: zero3's fields (per-submodule
    // fetch within the prefetch bucket, fp32 gradients out, per-layer checkpoints, DeepSpeedCPUAdam after
    // backward) plus its hooks and its host state: bf16 partition 2 + fp32 master 4 + fp32 m, v 8 + fp32
    // grad 4 = 18 B (fp32 training: 16 B, no bf16 partition; paper precision it does not run).
    {.name = "deepspeed-zero3", .peer = 1,
     .summary = "DeepSpeed ZeRO-3 + CPU offload as it runs: per-submodule fetch through Python hooks, fp32 "
                "gradients out, DeepSpeedCPUAdam on the fp32 master after backward, then the bf16 copy",
     .takes = MT_TAKES_ZERO3 | MT_TAKES_BIND, .submodule_fetch = 1, .ckpt_interval = 1, .grad_wire_f32 = 1,
     .optimizer_master = 1, .fetch_overhead_ms = MT_PEER_DS_HOOK_MS, .eager_scale = MT_PEER_EAGER_SCALE,
     .attention_kernel = "torch_sdpa", // the HF model with attn_implementation="sdpa" (baselines/peers)
     .host_bytes_per_param = {0, 18, 16}, .derive = zero3_derive},
    // PyTorch FSDP2 fully_shard per decoder layer and the root, CPUOffloadPolicy(pin_memory=True),
    // MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), world size 1: a layer is one fetch (its
    // fp32 shard copied in, cast to bf16 on the device), the next one in flight behind it; every layer
    // checkpointed; fp32 gradients offloaded; torch.optim.AdamW on the CPU after backward. 16 B/param.
    {.name = "fsdp2-offload", .peer = 1,
     .summary = "PyTorch FSDP2 with CPUOffloadPolicy on one GPU: per-layer fetch of fp32 shards cast on the device, "
                "fp32 gradients out, torch AdamW on the CPU after backward",
     .weight_bufs = 2, .prefetch_elems = -1, .ckpt_interval = 1, .host_pinned = 1, .param_wire_f32 = 1,
     .grad_wire_f32 = 1, .optimizer_master = 1, .fetch_overhead_ms = MT_PEER_FSDP2_HOOK_MS,
     .eager_scale = MT_PEER_EAGER_SCALE,
     .attention_kernel = "torch_sdpa", // as DeepSpeed's: the HF model with SDPA
     .host_bytes_per_param = {0, 16, 16}},
    // The official MegaTrain (DLYuanGod/MegaTrain, infinity/model/cpu_master.py and examples/sft/train.py):
    // double-buffered layer streaming, a checkpoint every 4 layers, each layer loaded in forward, in its
    // block's recompute and again in backward (where autograd re-runs its forward), bound by copying the
    // flat buffer into a layer template, bf16 gradients out, the optimizer after backward, then the pinned
    // bf16 flats refreshed. Host: bf16 params 2 + bf16 grads 2 + fp32 m, v 8 + pinned bf16 flats 2 = 14 B.
    {.name = "official", .peer = 1,
     .summary = "the official MegaTrain code: 3 weight passes, checkpoint every 4 layers, copy bind, "
                "DeepSpeedCPUAdam after backward, then the pinned bf16 flats refreshed",
     .weight_bufs = 2, .prefetch_elems = -1, .ckpt_interval = 4, .host_pinned = 1, .bind = MT_BIND_COPY,
     .weight_passes = 3,
     // --gpus N (infinity/model/mp_worker.py, mp_state.py): each spawned worker copies its whole gradient to
     // its own pinned slabs and adds it into the shared-memory .grad under one cross-process lock
     .dp_host_add = 1,
     // attn_implementation flash_attention_2 (qwen_7b_1gpu.yaml): the flash-attn package, which the GPU
     // machine lacks; PyTorch's SDPA flash backend runs FlashAttention-2's kernels and stands in for it
     .attention_kernel = "torch_sdpa_flash", .host_bytes_per_param = {14, 0, 0}},
};
#define N_SCHEDULES (int)(sizeof table / sizeof *table)

int mt_schedule_count(void) { return N_SCHEDULES; }
const mt_schedule_desc *mt_schedule_at(int i) { return i >= 0 && i < N_SCHEDULES ? &table[i] : NULL; }

const mt_schedule_desc *mt_schedule_row(const char *name) {
    for (int i = 0; i < N_SCHEDULES; i++)
        if (!strcmp(name, table[i].name)) return &table[i];
    return NULL;
}

mt_status mt_schedule_find(const char *name, const mt_schedule_desc **out) {
    const mt_schedule_desc *row = mt_schedule_row(name);
    if (row && !row->peer) {
        *out = row;
        return MT_OK;
    }
    if (row)
        return mt_fail(MT_ERR_ARG, "--schedule %s: that is a peer as it runs (sim and plan only); HINT: --peer %s "
                                   "--backend sim", name, name);
    char known[256] = "";
    for (int i = 0; i < N_SCHEDULES; i++) {
        if (table[i].peer) continue;
        size_t n = strlen(known);
        snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", table[i].name);
    }
    return mt_fail(MT_ERR_ARG, "--schedule: unknown value '%s' (expected one of: %s)", name, known);
}

static const char *recompute_names[] = {"full", "mlp", "norms", "swiglu", "none"};

mt_status mt_recompute_parse(const char *s, mt_recompute *out) {
    for (int i = MT_RECOMPUTE_FULL; i <= MT_RECOMPUTE_NONE; i++)
        if (!strcmp(s, recompute_names[i])) return *out = (mt_recompute)i, MT_OK;
    if (!strcmp(s, "auto")) return *out = MT_RECOMPUTE_AUTO, MT_OK;
    return mt_fail(MT_ERR_ARG, "--recompute: unknown value '%s' (expected one of full, mlp, norms, swiglu, none, auto)",
                   s);
}

const char *mt_recompute_name(mt_recompute r) {
    return r >= MT_RECOMPUTE_FULL && r <= MT_RECOMPUTE_NONE ? recompute_names[r] : "auto";
}

void mt_schedule_set_recompute(mt_schedule_desc *d, mt_recompute r) {
    d->recompute = r;
    d->keep_activations = r != MT_RECOMPUTE_FULL;
    d->keep_mlp = r == MT_RECOMPUTE_NONE ? 2 : r >= MT_RECOMPUTE_NORMS ? 1 : 0;
    d->recompute_norms = r == MT_RECOMPUTE_MLP || r == MT_RECOMPUTE_NORMS;
    if (d->keep_activations) { // every layer's input is kept: no blocks to rebuild, nothing to offload
        d->ckpt_interval = 1;
        d->offload_checkpoints = 0;
    }
}

void mt_schedule_resolve(const mt_schedule_desc *entry, const mt_schedule_opts *o, const mt_config *c,
                         mt_schedule_desc *d) {
    *d = *entry;
    if (d->takes & MT_TAKES_BIND) d->bind = o->bind; // ours bind either way (copy: the official code's ablation)
    if (d->takes & MT_TAKES_WEIGHT_BUFS) d->weight_bufs = o->weight_bufs;
    if (d->takes & MT_TAKES_CKPT_INTERVAL) d->ckpt_interval = o->ckpt_interval;
    if (d->takes & MT_TAKES_SERIAL_OPT) d->optimizer_overlapped = !o->serial_optimizer;
    d->offload_checkpoints = (d->takes & MT_TAKES_OFFLOAD_CKPT) ? o->offload_checkpoints : 0;
    if (d->takes & MT_TAKES_ZERO3) d->zero3 = o->zero3;
    // Speculation needs the overlapped optimizer: its point is that the next forward does not wait.
    d->speculative = (d->takes & MT_TAKES_SPECULATIVE) && d->optimizer_overlapped && o->speculative != 0;
    if ((d->takes & MT_TAKES_UPDATE_PARTS) && o->update_parts > 0) d->update_parts = o->update_parts;
    if (!d->optimizer_overlapped) d->update_parts = 0;
    // Rows first, like speculation, only pays where the next forward runs beside the update.
    d->rows_first = (d->takes & MT_TAKES_ROWS_FIRST) && d->optimizer_overlapped && o->rows_first != 0;
    // auto stays auto (priced as full) until the engine's shape resolves it against the device.
    if ((d->takes & MT_TAKES_RECOMPUTE) && o->recompute != MT_RECOMPUTE_AUTO)
        mt_schedule_set_recompute(d, o->recompute);
    else if (d->takes & MT_TAKES_RECOMPUTE) d->recompute = MT_RECOMPUTE_AUTO;
    if (d->derive) d->derive(d, c);
    int L = c->num_layers;
    if (d->weights_resident) d->weight_bufs = L;
    if (d->weight_bufs > L) d->weight_bufs = L;
    d->lookahead = d->weight_bufs - 1; // resident: the weight ring raises it to every use (all loads up front)
}
