// plan.c: the memory side of a plan and whether it fits a machine.
//   GPU: the engine's footprint, part by part (activations bf16 for paper/mixed,
//     f32 for fp32: the CUDA backend's choice), for every schedule. `--backend cpu` named:
//     that backend's (f32 activations, its kernels' scratch), its "device" in host memory.
//   host: the engine's footprint too, unless the schedule's descriptor states the
//     real system's host bytes per parameter (zero3: DeepSpeed's, zero3_memory.c).
// Fits: host_bytes (+ gpu_bytes on the cpu backend) <= (1 - 5%) of host memory (the rest is left to the OS),
//       pinned_bytes <= the same or the lock limit (ulimit -l, measured only), gpu_bytes <= GPU memory - 1 GiB (CUDA context,
//       cuBLAS workspace, allocator slack).
#include <string.h>

#include "engine/engine.h"
#include "planner/planner.h"

mt_status mt_plan_input_validate(const mt_config *c, const mt_plan_input *in) {
    return mt_engine_opts_validate(&in->eng, c); // the engine's own, so a plan and a run accept the same
}

mt_status mt_plan_memory_compute(const mt_config *c, const mt_plan_input *in, mt_plan_memory *out) {
    memset(out, 0, sizeof *out);
    MT_TRY(mt_plan_input_validate(c, in));
    mt_engine_opts eo = in->eng;
    // bf16 activations unless fp32 or a backend computing in f32 only (cli/run_setup.c's choice)
    unsigned caps = in->backend_caps;
    mt_dtype act = in->prec == MT_PREC_FP32 || (caps && !(caps & MT_CAP_BF16)) ? MT_F32 : MT_BF16;
    if (caps && eo.host_free) { // its "device" is host memory: the speculative spares take what it leaves (engine.c)
        size_t dev = mt_engine_footprint_of(c, in->prec, &eo, act, in->gpu_free_bytes, caps).device_bytes;
        eo.host_free = dev < eo.host_free ? eo.host_free - dev : 1; // 1: no room (0 would mean "no limit")
    }
    out->device_in_host = caps != 0;
    out->engine = mt_engine_footprint_of(c, in->prec, &eo, act, in->gpu_free_bytes, caps); // caps 0: no backend
    const mt_engine_footprint *e = &out->engine;
    out->gpu_bytes = e->device_bytes;
    int bpp = in->eng.schedule->host_bytes_per_param[in->prec];
    if (bpp && (in->eng.schedule->takes & MT_TAKES_ZERO3)) {
        mt_zero3_memory(c, in, out);
        return MT_OK;
    }
    if (bpp) { // a peer's own host state per parameter (engine/peer.h), beside our staging and pinning
        out->host_state_bytes = (size_t)bpp * (size_t)mt_config_params_total(c);
        out->host_staging_bytes = e->grads.host + e->activations.host;
        out->host_bytes = out->host_state_bytes + out->host_staging_bytes;
        out->pinned_bytes = e->pinned_bytes;
        out->host_bytes_per_param = bpp;
        out->host_accounting = "the peer's own host state per parameter (baselines/PEERS.md) + our engine's staging; "
                               "pinned: what our engine pins for this descriptor";
        return MT_OK;
    }
    unsigned char on[c->num_layers + 2];
    mt_plan_devopt(c, in, in->eng.device_optimizer, on, &out->devopt_gpu_bytes); // the split's state, beside the plan
    out->gpu_bytes += out->devopt_gpu_bytes;
    out->host_bytes = e->host_bytes;
    out->pinned_bytes = e->pinned_bytes;
    out->host_state_bytes = e->state.host;
    out->host_staging_bytes = e->grads.host + e->activations.host + e->rows_bytes;
    out->host_spare_bytes = e->optimizer.host + e->weights.host - e->rows_bytes; // the speculative spares
    out->host_bytes_per_param = (double)out->host_state_bytes / (double)mt_config_params_total(c);
    out->host_accounting =
        in->prec == MT_PREC_PAPER ? "engine (mt_engine_footprint_of), paper: bf16 params 2 + bf16 grads 2 + f32 m 4 + v 4 "
                                    "= 12 B/param (regions page-aligned), + pinned grad slabs and token staging"
        : in->prec == MT_PREC_MIXED ? "engine (mt_engine_footprint_of), mixed: bf16 params 2 + bf16 grads 2 + f32 m 4 + v 4 "
                                      "+ f32 master 4 = 16 B/param, + pinned grad slabs and token staging"
                                    : "engine (mt_engine_footprint_of), fp32: f32 params 4 + grads 4 + m 4 + v 4 = 16 "
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
    // On a backend whose "device" is host memory (cpu) both come out of the host's.
    double host_need = (double)m->host_bytes + m->device_in_host * (double)m->gpu_bytes;
    if (host_need > out->host_have_bytes) add_short(out, "host", host_need, out->host_have_bytes);
    // Pinned bytes are part of host bytes: a pinned shortfall is news only under a lower lock limit.
    if ((double)m->pinned_bytes > out->pinned_have_bytes && out->pinned_have_bytes < out->host_have_bytes)
        add_short(out, "pinned", (double)m->pinned_bytes, out->pinned_have_bytes);
    if (!m->device_in_host && (double)m->gpu_bytes > out->gpu_have_bytes)
        add_short(out, "gpu", (double)m->gpu_bytes, out->gpu_have_bytes);
    out->fits = out->n_short == 0;
}
