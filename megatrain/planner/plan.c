// plan.c: the memory side of a plan: which accounting each schedule uses and
// whether the result fits a machine.
//   megatrain, resident: mt_engine_memory_plan, the engine's own numbers
//     (activations bf16 for paper/mixed, f32 for fp32: the CUDA backend's choice).
//   naive: the same engine accounting (one device weight buffer).
//   zero3: DeepSpeed's accounting (zero3_memory.c).
// Fits: host_bytes <= (1 - 5%) of host memory (the rest is left to the OS),
//       pinned_bytes <= the same or the lock limit (ulimit -l, measured only), gpu_bytes <= GPU memory - 1 GiB (CUDA context,
//       cuBLAS workspace, allocator slack).
#include <string.h>

#include "engine/engine.h"
#include "planner/planner.h"

mt_status mt_plan_input_validate(const mt_config *c, const mt_plan_input *in) {
    if (in->B <= 0) return mt_fail(MT_ERR_ARG, "--batch: must be positive (got %d)", in->B);
    if (in->T <= 0) return mt_fail(MT_ERR_ARG, "--seq-len: must be positive (got %d)", in->T);
    if (in->grad_accum <= 0) return mt_fail(MT_ERR_ARG, "--grad-accum: must be positive (got %d)", in->grad_accum);
    if ((long long)in->B * in->T > 1LL << 30)
        return mt_fail(MT_ERR_ARG, "--batch x --seq-len: %lld tokens per micro-batch is too many (the engine's limit is 2^30)",
                       (long long)in->B * in->T);
    if (in->ckpt_interval <= 0 || in->ckpt_interval > c->num_layers)
        return mt_fail(MT_ERR_ARG, "--checkpoint-interval: must be in 1..%d (the layer count), got %d", c->num_layers,
                       in->ckpt_interval);
    if (in->schedule == MT_SCHED_MEGATRAIN && (in->weight_bufs < 1 || in->weight_bufs > 3))
        return mt_fail(MT_ERR_ARG, "--weight-buffers: must be 1, 2 or 3 (got %d)", in->weight_bufs);
    if (in->grad_slabs < 1 || in->grad_slabs > 64)
        return mt_fail(MT_ERR_ARG, "--grad-slabs: must be in 1..64 (got %d)", in->grad_slabs);
    return MT_OK;
}

static void from_engine(const mt_memory_plan *e, mt_plan_memory *out) {
    out->host_bytes = e->host_bytes;
    out->pinned_bytes = e->pinned_bytes;
    out->gpu_bytes = e->device_bytes;
    out->host_state_bytes = e->state_bytes;
    out->host_staging_bytes = e->staging_bytes;
    out->gpu_weights_bytes = e->weights_bytes;
    out->gpu_grads_bytes = e->grads_bytes;
    out->gpu_checkpoint_bytes = e->checkpoint_bytes;
    out->gpu_activation_bytes = e->activation_bytes;
    out->checkpoint_host_bytes = e->checkpoint_host_bytes;
    out->offload_checkpoints = e->offload_checkpoints;
    out->grad_sum_f32 = e->grad_sum_f32;
    out->gpu_grad_sum_bytes = e->grad_sum_bytes;
}

mt_status mt_plan_memory_compute(const mt_config *c, const mt_plan_input *in, mt_plan_memory *out) {
    memset(out, 0, sizeof *out);
    MT_TRY(mt_plan_input_validate(c, in));
    mt_engine_opts eo = {.schedule = in->schedule, .grad_sum = in->grad_sum, .B = in->B, .T = in->T, .grad_accum = in->grad_accum,
                         .ckpt_interval = in->ckpt_interval, .weight_bufs = in->weight_bufs, .grad_slabs = in->grad_slabs, .mlp_rows = in->mlp_rows,
                         .overlap_optimizer = in->schedule == MT_SCHED_MEGATRAIN, .zero3 = in->zero3,
                         .copy_bind = in->copy_bind,
                         .offload_checkpoints = in->schedule == MT_SCHED_ZERO3 ? 0 : in->offload_checkpoints};
    mt_dtype act = in->prec == MT_PREC_FP32 ? MT_F32 : MT_BF16;
    mt_memory_plan e = mt_engine_memory_plan(c, in->prec, &eo, act, in->gpu_free_bytes);
    if (in->schedule == MT_SCHED_ZERO3) {
        mt_zero3_memory(c, in, out);
        out->engine_host_bytes = e.host_bytes;
        return MT_OK;
    }
    from_engine(&e, out);
    out->engine_host_bytes = out->host_bytes;
    out->host_bytes_per_param = (double)out->host_state_bytes / (double)mt_config_params_total(c);
    out->host_accounting =
        in->prec == MT_PREC_PAPER ? "engine (mt_engine_memory_plan), paper: bf16 params 2 + bf16 grads 2 + f32 m 4 + v 4 "
                                    "= 12 B/param (regions page-aligned), + pinned grad slabs and token staging"
        : in->prec == MT_PREC_MIXED ? "engine (mt_engine_memory_plan), mixed: bf16 params 2 + bf16 grads 2 + f32 m 4 + v 4 "
                                      "+ f32 master 4 = 16 B/param, + pinned grad slabs and token staging"
                                    : "engine (mt_engine_memory_plan), fp32: f32 params 4 + grads 4 + m 4 + v 4 = 16 "
                                      "B/param, + pinned grad slabs and token staging";
    return MT_OK;
}

static void add_short(mt_plan_fit *f, const char *res, double need, double have) {
    mt_plan_short *s = &f->shortfall[f->n_short++];
    s->resource = res;
    s->need_bytes = need;
    s->have_bytes = have;
}

void mt_plan_check_fit(const mt_plan_memory *m, const mt_hw_profile *hw, mt_plan_fit *out) {
    memset(out, 0, sizeof *out);
    out->host_have_bytes = hw->host_mem_bytes * (1.0 - MT_PLAN_HOST_RESERVE);
    out->pinned_have_bytes = out->host_have_bytes;
    if (hw->pinned_limit_bytes > 0 && hw->pinned_limit_bytes < out->pinned_have_bytes)
        out->pinned_have_bytes = hw->pinned_limit_bytes;
    out->gpu_have_bytes = hw->hbm_bytes - (double)MT_PLAN_GPU_RESERVE_BYTES;
    if (out->gpu_have_bytes < 0) out->gpu_have_bytes = 0;
    if ((double)m->host_bytes > out->host_have_bytes) add_short(out, "host", (double)m->host_bytes, out->host_have_bytes);
    // Pinned bytes are part of host bytes: a pinned shortfall is news only under a lower lock limit.
    if ((double)m->pinned_bytes > out->pinned_have_bytes && out->pinned_have_bytes < out->host_have_bytes)
        add_short(out, "pinned", (double)m->pinned_bytes, out->pinned_have_bytes);
    if ((double)m->gpu_bytes > out->gpu_have_bytes) add_short(out, "gpu", (double)m->gpu_bytes, out->gpu_have_bytes);
    out->fits = out->n_short == 0;
}
