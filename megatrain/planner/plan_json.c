// plan_json.c: the JSON step of `megatrain plan`: a computed plan (plan_build.c) as one
// object of schema megatrain.plan/1 (docs/DESIGN.md#plan), its keys in the order it has
// always had (the golden records, megatrain/tests/golden, compare them byte for byte).
#include <stdio.h>
#include <string.h>

#include "core/metrics.h"
#include "planner/plan_build.h"

static void add_num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }

// --batch auto: every candidate compared, the choice and why (the most predicted tokens/s within memory).
static void add_batch_search(cJSON *j, const mt_batch_search *bs, const mt_hw_profile *hw) {
    cJSON *a = cJSON_AddObjectToObject(j, "batch_auto");
    cJSON *arr = cJSON_AddArrayToObject(a, "candidates");
    for (int i = 0; i < bs->n; i++) {
        const mt_batch_candidate *k = &bs->c[i];
        cJSON *e = cJSON_CreateObject();
        add_num(e, "batch", k->B);
        cJSON_AddStringToObject(e, "recompute", mt_recompute_name(k->recompute));
        add_num(e, "checkpoint_interval", k->ckpt_interval);
        add_num(e, "weight_buffers", k->weight_bufs);
        cJSON_AddStringToObject(e, "checkpoints", k->offload_checkpoints ? "host" : "device");
        add_num(e, "gpu_bytes", k->gpu_bytes);
        add_num(e, "host_bytes", k->host_bytes);
        add_num(e, "step_ms", k->step_ms);
        add_num(e, "tokens_per_s", k->tokens_per_s);
        if (k->sim_step_ms > 0) {
            add_num(e, "sim_step_ms", k->sim_step_ms);
            add_num(e, "sim_tokens_per_s", k->sim_tokens_per_s);
        }
        cJSON_AddStringToObject(e, "bound", k->bound);
        cJSON_AddItemToArray(arr, e);
    }
    add_num(a, "choice", bs->best);
    add_num(a, "max_fit_batch", bs->max_fit_B);
    add_num(a, "sim_checked", bs->n_sim); // the closed form's best, run in the sim: its rate decides
    char why[512];
    mt_batch_search_why(bs, hw, why, sizeof why);
    cJSON_AddStringToObject(a, "why", why);
}

// The "ranks" object of `plan --gpus N --hosts H`: every term the step was priced with (planner/ranks.c).
static void ranks_json(cJSON *j, const mt_plan_ranks *r) {
    cJSON *o = cJSON_AddObjectToObject(j, "ranks");
    add_num(o, "gpus", r->gpus);
    add_num(o, "hosts", r->hosts);
    add_num(o, "batch_per_gpu", r->rank_batch);
    cJSON_AddStringToObject(o, "gradients", r->host_add ? "host add under one lock (every rank copies its whole "
                                                          "gradient out; the official code's workers, no NCCL)"
                                                        : "NCCL reduce-scatter, each rank copies 1/N out");
    add_num(o, "gpus_per_pcie_uplink", r->gpus_per_uplink);
    add_num(o, "h2d_gbps_per_gpu", r->h2d_gbps);
    add_num(o, "d2h_gbps_per_gpu", r->d2h_gbps);
    cJSON_AddStringToObject(o, "link_limit", r->link_limit);
    if (r->collective_gbps > 0) {
        add_num(o, "collective_gbps", r->collective_gbps);
        cJSON_AddStringToObject(o, "collective_link", r->collective_link);
        add_num(o, "reduce_scatter_bytes_per_gpu", r->reduce_bytes_per_gpu);
        add_num(o, "reduce_scatter_ms", r->reduce_ms);
    }
    add_num(o, "d2h_bytes_per_gpu", r->d2h_bytes_per_gpu);
    add_num(o, "h2d_bytes_per_gpu", r->rank.h2d_bytes);
    if (r->host_add_bytes > 0) add_num(o, "host_add_bytes", r->host_add_bytes);
    add_num(o, "host_traffic_bytes", r->host_traffic_bytes);
    add_num(o, "host_floor_ms", r->host_floor_ms);
    add_num(o, "rank_step_ms", r->rank.step_ms);
    if (r->hosts > 1) {
        cJSON *h = cJSON_AddObjectToObject(o, "across_hosts");
        cJSON_AddStringToObject(h, "design", r->grads_sliced
            ? "optimizer state and gradients sharded: each unit's gradient reduce-scattered micro-batch by "
              "micro-batch as it lands, under the backward (each host adds the hosts' contributions to its slice "
              "in host order), each host updates its slice, the parameters all-gathered "
              "(engine/collective_hosts.c, engine/hosts_mpi.c)"
            : "optimizer state sharded: each unit's gradient reduce-scattered after the backward (each host "
              "adds the hosts' contributions to its slice in host order), each host updates its slice, the "
              "parameters all-gathered (engine/hosts_mpi.c)");
        cJSON_AddBoolToObject(h, "grads_sliced", r->grads_sliced);
        add_num(h, "link_bytes_per_host", r->link_bytes_per_host); // sent, and received alike
        add_num(h, "mem_bytes_per_host", r->hosts_mem_bytes);
        add_num(h, "ms", r->hosts_ms); // the reduce-scatter's exposed time
        add_num(h, "reduce_scatter_ms", r->hosts_rs_ms); // one micro-batch's, all units
        if (r->grads_sliced) add_num(h, "under_backward_ms", r->hosts_backward_ms);
        if (r->grads_sliced) add_num(h, "nic_gbps_to_hide", r->nic_gbps_to_hide); // 0: the memory's part alone shows
        add_num(h, "gather_ms", r->gather_ms); // the all-gather, in the rank's optimizer under the next forward
        add_num(h, "largest_unit_bytes", r->largest_unit_bytes);
        add_num(h, "state_bytes_not_kept_per_host", r->state_saved_bytes);
        add_num(h, "staging_bytes_per_host", r->staging_bytes);
        add_num(h, "unsharded_bytes_per_host", r->unsharded_bytes_per_host); // --shard-optimizer off
    }
    add_num(o, "step_ms", r->step_ms);
    add_num(o, "tokens_per_s", r->tokens_per_s);
    add_num(o, "tflops", r->tflops);
    add_num(o, "tflops_per_gpu", r->tflops_per_gpu);
    add_num(o, "one_gpu_tokens_per_s", r->one_gpu_tokens_per_s);
    add_num(o, "scaling_efficiency", r->scaling_efficiency);
    cJSON_AddStringToObject(o, "bound", r->bound);
    add_num(o, "host_bytes_per_host", r->host_bytes_per_host);
    add_num(o, "host0_bytes", r->host0_bytes);
    add_num(o, "gpu_bytes_per_gpu", r->gpu_bytes);
    cJSON_AddStringToObject(o, "model", "closed form (planner/ranks.c over predict.c's analytic-v1); the sim prices "
                                        "one GPU only");
}

// The --tokens-per-day search: every candidate compared and the choice.
static void tokens_per_day_json(cJSON *j, const mt_plan_tpd_search *t) {
    cJSON *o = cJSON_AddObjectToObject(j, "tokens_per_day");
    add_num(o, "target", t->target);
    add_num(o, "batch_per_gpu", t->batch_per_gpu);
    cJSON *arr = cJSON_AddArrayToObject(o, "candidates");
    for (int i = 0; i < t->n; i++) {
        const mt_plan_tpd_candidate *k = &t->c[i];
        cJSON *e = cJSON_CreateObject();
        add_num(e, "gpus", k->gpus);
        add_num(e, "hosts", k->hosts);
        add_num(e, "tokens_per_day", k->tokens_per_day);
        add_num(e, "tokens_per_s", k->tokens_per_s);
        add_num(e, "scaling_efficiency", k->scaling_efficiency);
        add_num(e, "host_bytes_per_host", k->host_bytes_per_host);
        cJSON_AddBoolToObject(e, "fits", k->fits);
        cJSON_AddStringToObject(e, "bound", k->bound);
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddBoolToObject(o, "reached", t->reached);
    add_num(o, "gpus", t->gpus);
    add_num(o, "hosts", t->hosts);
    char why[300];
    if (t->reached)
        snprintf(why, sizeof why, "the fewest GPUs (one host first, then whole hosts) whose projected tokens/s x 86400 "
                                  "reaches the target within host memory; %d compared", t->n);
    else
        snprintf(why, sizeof why, "no candidate reaches the target (%d compared; %s); the plan is the last one's", t->n,
                 t->stop);
    cJSON_AddStringToObject(o, "why", why);
}

mt_status mt_plan_json(const mt_plan_built *b, cJSON **out) {
    const mt_plan_request *rq = &b->rq;
    const mt_schedule_desc *sd = rq->in.eng.schedule;
    *out = NULL;
    long long N = mt_config_params_total(&b->cfg);
    cJSON *j = cJSON_CreateObject();
    if (!j) return mt_fail(MT_ERR_MEMORY, "plan: out of memory");
    cJSON_AddStringToObject(j, "schema", "megatrain.plan/1");
    cJSON_AddStringToObject(j, "config", rq->config_src);
    cJSON_AddStringToObject(j, "model_type", mt_arch_model_type(b->cfg.arch));
    add_num(j, "params", (double)N);
    add_num(j, "params_per_layer", (double)mt_config_params_per_layer(&b->cfg));
    add_num(j, "layers", b->cfg.num_layers);
    cJSON_AddStringToObject(j, "schedule", sd->name);
    cJSON_AddStringToObject(j, "precision", mt_precision_name(b->in.prec));
    add_num(j, "batch", b->in.eng.B);
    add_num(j, "seq_len", b->in.eng.T);
    add_num(j, "grad_accum", b->in.eng.grad_accum);
    if (sd->takes & MT_TAKES_CKPT_INTERVAL) add_num(j, "checkpoint_interval", b->in.eng.sched.ckpt_interval);
    if (sd->takes & MT_TAKES_WEIGHT_BUFS) add_num(j, "weight_buffers", b->in.eng.sched.weight_bufs);
    if (rq->recompute_given || rq->batch_auto) { // what the backward recomputes, auto resolved (docs/DESIGN.md#plan)
        cJSON_AddStringToObject(j, "recompute", mt_recompute_name(b->mem.engine.recompute));
        cJSON_AddStringToObject(j, "recompute_asked", rq->batch_auto && !rq->recompute_given
                                                          ? "auto (--batch auto)"
                                                          : mt_recompute_name(rq->in.eng.sched.recompute));
    }
    if (rq->batch_auto) add_batch_search(j, &b->bs, &b->hw);
    if (b->several) ranks_json(j, &b->rk);
    if (rq->tokens_per_day > 0) tokens_per_day_json(j, &b->tpd);
    cJSON_AddStringToObject(j, "bind", b->rs.bind == MT_BIND_COPY ? "copy" : "pointer");
    add_num(j, "tokens_per_step", (double)b->in.eng.B * b->in.eng.T * b->in.eng.grad_accum);

    cJSON_AddBoolToObject(j, "fits", b->fit.fits);
    add_num(j, "host_bytes", (double)b->mem.host_bytes);
    add_num(j, "pinned_bytes", (double)b->mem.pinned_bytes);
    add_num(j, "gpu_bytes", (double)b->mem.gpu_bytes);
    add_num(j, "bytes_per_param", b->mem.host_bytes_per_param);
    if (b->fit.n_short) {
        cJSON *sh = cJSON_AddArrayToObject(j, "short");
        for (int i = 0; i < b->fit.n_short; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "resource", b->fit.shortfall[i].resource);
            add_num(e, "need_bytes", b->fit.shortfall[i].need_bytes);
            add_num(e, "have_bytes", b->fit.shortfall[i].have_bytes);
            cJSON_AddItemToArray(sh, e);
        }
    }
    if (b->have_rates) {
        add_num(j, "step_ms", b->pr.step_ms);
        add_num(j, "tokens_per_s", b->pr.tokens_per_s);
        add_num(j, "tflops", b->pr.tflops);
        add_num(j, "mfu", b->pr.mfu);
        if (!b->several) { // model FLOPs (core/METRICS.md): no input embedding, causal attention included
            double fpt = mt_metric_model_flops_per_token(
                mt_metric_params_model((double)N, b->cfg.vocab_size, b->cfg.hidden_size, b->cfg.tie_word_embeddings),
                b->cfg.num_layers, b->cfg.num_heads, b->cfg.head_dim, b->in.eng.T);
            double mtf = mt_metric_model_tflops(fpt, (double)b->in.eng.B * b->in.eng.T * b->in.eng.grad_accum, b->pr.step_ms);
            add_num(j, "model_flops_per_token", fpt);
            add_num(j, "model_tflops", mtf);
            add_num(j, "model_mfu", mt_metric_mfu(mtf, b->hw.peak_tflops[MT_PEAK_BF16]));
        }
        add_num(j, "hfu", b->pr.hfu);
        add_num(j, "days_per_billion_tokens", b->pr.days_per_billion_tokens);
        cJSON_AddStringToObject(j, "bound", b->pr.bound);
        cJSON *aj = cJSON_AddObjectToObject(j, "attention"); // as priced: which kernel, at what rate, from where
        cJSON_AddStringToObject(aj, "kernel", b->pr.attention_kernel);
        add_num(aj, "tflops", b->pr.attention_tflops);
        add_num(aj, "ms", b->pr.attention_ms);
        cJSON_AddStringToObject(aj, "source", b->pr.attention_source);
    }
    if (sd->takes & MT_TAKES_SPECULATIVE) { // the plan says whether the step speculates, and what a rollback costs
        cJSON *sp = cJSON_AddObjectToObject(j, "speculative");
        cJSON_AddBoolToObject(sp, "on", b->mem.engine.spec_window > 0);
        add_num(sp, "window_units", b->mem.engine.spec_window);
        add_num(sp, "spare_bytes", (double)b->mem.host_spare_bytes);
        if (b->have_rates && b->pr.spec_units) {
            add_num(sp, "rollback_rate", rq->in.rollback_rate);
            add_num(sp, "step_ms_no_rollback", b->pr.step_ms_no_rollback);
            add_num(sp, "rollback_cost_ms", b->pr.rollback_cost_ms);
        }
    }
    if (!rq->peer) { // the split (--device-optimizer): its units, bytes and step; off: what auto would give
        cJSON *dj = cJSON_AddObjectToObject(j, "device_optimizer");
        int want = rq->in.eng.device_optimizer;
        char set[16];
        snprintf(set, sizeof set, "%d", want);
        cJSON_AddStringToObject(dj, "setting", want < 0 ? "auto" : want == 0 ? "off" : set);
        add_num(dj, "units", b->pr.devopt_units);
        add_num(dj, "gpu_bytes", (double)b->mem.devopt_gpu_bytes);
        if (b->have_rates) {
            add_num(dj, "params", b->pr.devopt_params);
            add_num(dj, "adamw_ms", b->pr.devopt_adamw_ms);
            add_num(dj, "step_ms_off", b->pr.step_ms_split_off);
            if (want == 0) {
                cJSON *aj = cJSON_AddObjectToObject(dj, "auto");
                add_num(aj, "units", b->pr.devopt_auto_units);
                add_num(aj, "gpu_bytes", b->pr.devopt_auto_gpu_bytes);
                add_num(aj, "step_ms", b->pr.devopt_auto_step_ms);
            }
        }
    }
    if (sd->takes & MT_TAKES_ROWS_FIRST) { // the embedding's rows first: on, how many rows a step may stage, its bytes
        cJSON *rf = cJSON_AddObjectToObject(j, "embedding_rows_first");
        cJSON_AddBoolToObject(rf, "on", b->mem.engine.rows_cap > 0);
        add_num(rf, "stage_rows", (double)b->mem.engine.rows_cap);
        add_num(rf, "host_bytes", (double)b->mem.engine.rows_bytes);
    }
    if (rq->max_context) {
        add_num(j, "max_seq_len", b->max_seq_len);
        add_num(j, "max_position_embeddings", b->cfg.max_position_embeddings);
    }

    cJSON *h = cJSON_AddObjectToObject(j, "host");
    add_num(h, "state_bytes", (double)b->mem.host_state_bytes);
    add_num(h, "staging_bytes", (double)b->mem.host_staging_bytes);
    add_num(h, "spare_bytes", (double)b->mem.host_spare_bytes);
    cJSON_AddStringToObject(h, "accounting", b->mem.host_accounting);
    add_num(h, "mem_bytes", b->hw.host_mem_bytes);
    add_num(h, "reserve_fraction", MT_PLAN_HOST_RESERVE);
    add_num(h, "have_bytes", b->fit.host_have_bytes);
    if (sd->host_bytes_per_param[b->in.prec] && (sd->takes & MT_TAKES_ZERO3)) { // the real system's own accounting, beside what our schedule allocates
        add_num(h, "deepspeed_estimator_bytes", 1.5 * (double)sd->host_bytes_per_param[b->in.prec] * (double)N);
        add_num(h, "engine_zero3_bytes", (double)b->mem.engine.host_bytes);
        add_num(j, "deepspeed_gpu_bytes", (double)b->mem.deepspeed_gpu_bytes);
    }
    cJSON *g = cJSON_AddObjectToObject(j, "gpu");
    add_num(g, "weights_bytes", (double)b->mem.engine.weights.device);
    add_num(g, "grads_bytes", (double)b->mem.engine.grads.device);
    add_num(g, "checkpoint_bytes", (double)b->mem.engine.checkpoints.device);
    add_num(g, "activation_bytes", (double)b->mem.engine.activations.device);
    // Layer-boundary checkpoints: on the device, or offloaded to pinned host memory (3 device slots).
    cJSON_AddStringToObject(g, "checkpoints", b->mem.engine.offload_checkpoints ? "host" : "device");
    // How chunked weight gradients (MLP, LM head) are summed: f32 (an f32 buffer, one rounding) or bf16
    // (one rounding per chunk, the official code's way); auto takes f32 where the device plan fits.
    cJSON_AddStringToObject(g, "grad_accum_dtype", b->mem.engine.grad_sum_f32 ? "f32" : "bf16");
    add_num(g, "grad_accum_bytes", (double)b->mem.engine.grad_sum_bytes);
    // plan --backend cpu: its kernels' f32 scratch (engine/footprint.c), in gpu_bytes; absent elsewhere
    if (b->mem.engine.scratch.device) add_num(g, "kernel_scratch_bytes", (double)b->mem.engine.scratch.device);
    if (b->mem.engine.offload_checkpoints) add_num(h, "checkpoint_bytes", (double)b->mem.engine.checkpoints.host);
    if (b->gpu_known) {
        add_num(g, "mem_bytes", b->hw.hbm_bytes);
        add_num(g, "reserve_bytes", (double)MT_PLAN_GPU_RESERVE_BYTES);
        add_num(g, "have_bytes", b->fit.gpu_have_bytes);
    }
    cJSON_AddBoolToObject(g, "checked", b->gpu_known);
    if (b->mem.device_in_host) cJSON_AddBoolToObject(g, "in_host_memory", 1); // plan --backend cpu: fit with host
    if (sd->takes & MT_TAKES_ZERO3) {
        const mt_zero3_knobs *zk = &b->in.eng.sched.zero3;
        cJSON *z = cJSON_AddObjectToObject(j, "zero3");
        cJSON_AddBoolToObject(z, "pin_memory", zk->pin_memory);
        cJSON_AddBoolToObject(z, "overlap_comm", zk->overlap_comm);
        add_num(z, "stage3_prefetch_bucket_size", (double)zk->prefetch_bucket_size);
        add_num(z, "stage3_param_persistence_threshold", (double)zk->param_persistence_threshold);
        add_num(z, "reduce_bucket_size", (double)zk->reduce_bucket_size);
        add_num(z, "stage3_max_live_parameters", (double)zk->max_live_parameters);
    }

    if (b->peer) { // what only the peer has (engine/peer.h; sources in baselines/PEERS.md)
        cJSON *pj = cJSON_AddObjectToObject(j, "peer");
        cJSON_AddStringToObject(pj, "name", b->peer->name);
        cJSON_AddStringToObject(pj, "what", b->peer->summary);
        cJSON_AddStringToObject(pj, "schedule_base", b->peer->like);
        add_num(pj, "host_bytes_per_param", b->rs.host_bytes_per_param[b->in.prec]);
        add_num(pj, "checkpoint_interval", b->rs.ckpt_interval);
        add_num(pj, "weight_passes", b->rs.weight_passes == 3 ? 3 : 2);
        add_num(pj, "weight_buffers", b->rs.weight_bufs);
        cJSON_AddStringToObject(pj, "fetch", b->rs.submodule_fetch ? "submodule" : "layer");
        add_num(pj, "fetch_overhead_ms", b->rs.fetch_overhead_ms);
        cJSON_AddStringToObject(pj, "fetch_overhead_source", b->peer->hook_source);
        add_num(pj, "eager_scale", b->rs.eager_scale > 0 ? b->rs.eager_scale : 1);
        cJSON_AddStringToObject(pj, "param_wire", b->rs.param_wire_f32 && b->in.prec == MT_PREC_MIXED ? "f32" : b->in.prec == MT_PREC_FP32 ? "f32" : "bf16");
        cJSON_AddStringToObject(pj, "grad_wire", b->rs.grad_wire_f32 || b->in.prec == MT_PREC_FP32 ? "f32" : "bf16");
        cJSON_AddStringToObject(pj, "optimizer", b->peer->opt.what);
        cJSON_AddStringToObject(pj, "optimizer_impl", b->peer->opt.impl);
        cJSON_AddStringToObject(pj, "optimizer_when", b->rs.optimizer_overlapped ? "overlapped" : "after backward (serial)");
        add_num(pj, "optimizer_bytes_per_param", b->peer->opt.bytes_per_param);
        add_num(pj, "host_pass_bytes_per_param", b->peer->opt.host_pass_bytes[b->in.prec]);
        if (b->have_rates) {
            add_num(pj, "optimizer_update_params_per_s", b->peer_rate.update_params_per_s);
            add_num(pj, "optimizer_params_per_s", b->peer_rate.params_per_s);
            cJSON_AddStringToObject(pj, "optimizer_rate_source", b->peer_rate.source);
        }
    }

    cJSON *hwj = cJSON_AddObjectToObject(j, "hardware");
    cJSON_AddStringToObject(hwj, "name", b->hw.name);
    cJSON_AddStringToObject(hwj, "source", b->hw.source);
    if (b->hw.gpu_name[0]) cJSON_AddStringToObject(hwj, "gpu", b->hw.gpu_name);
    if (b->hw.measured) cJSON_AddStringToObject(hwj, "note", b->hw.measured_note);
    if (!b->have_rates)
        cJSON_AddStringToObject(hwj, "note", b->gpu_known ? "no --hardware: this machine's memory, no speed prediction"
                                                       : "no --hardware: this machine's host memory; no GPU visible, so "
                                                         "GPU memory is not checked; no speed prediction");
    if (rq->host_mem_gb > 0) add_num(hwj, "host_mem_override_gb", rq->host_mem_gb);
    if (rq->nic_gbps > 0) add_num(hwj, "nic_override_gbps", rq->nic_gbps);

    if (b->have_rates) {
        cJSON *p = cJSON_AddObjectToObject(j, "prediction");
        cJSON_AddStringToObject(p, "model", b->pr.model);
        cJSON_AddStringToObject(p, "formula", b->pr.formula);
        cJSON_AddStringToObject(p, "flops_convention",
                                "executed = 6*P_mm + 12*L*dA*T (PaLM attention) + recompute 2*L*P_L + 4*L*dA*T per "
                                "token, P_mm = layer params + lm_head (embedding gather excluded); tflops and mfu use "
                                "6*N_all (docs/DESIGN.md#metrics), mfu and hfu against the bf16 dense peak");
        add_num(p, "compute_ms", b->pr.compute_ms);
        add_num(p, "h2d_ms", b->pr.h2d_ms);
        add_num(p, "d2h_ms", b->pr.d2h_ms);
        add_num(p, "optimizer_ms", b->pr.optimizer_ms);
        add_num(p, "gpu_idle_ms", b->pr.exposed_ms);
        add_num(p, "h2d_bytes", b->pr.h2d_bytes);
        add_num(p, "d2h_bytes", b->pr.d2h_bytes);
        add_num(p, "flops_6n", b->pr.flops_6n);
        add_num(p, "flops_executed", b->pr.flops_executed);
        add_num(p, "peak_tflops", b->hw.peak_tflops[b->in.prec == MT_PREC_FP32 ? MT_PEAK_FP32 : MT_PEAK_BF16]);
        add_num(p, "gemm_efficiency", b->hw.gemm_efficiency);
        if (b->hw.gemm_bwd_efficiency > 0 && b->in.prec != MT_PREC_FP32) // measured: the backward GEMMs' (predict.c)
            add_num(p, "gemm_bwd_efficiency", b->hw.gemm_bwd_efficiency);
    }
    *out = j;
    return MT_OK;
}
