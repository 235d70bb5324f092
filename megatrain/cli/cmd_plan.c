// cmd_plan.c: `megatrain plan`: one JSON object on stdout with the memory a
// configuration needs (host, pinned, GPU), whether it fits the machine, and,
// with --hardware, the predicted step time. Not fitting is a result (exit 0,
// "fits": false, "short": what is missing); bad input is one stderr line.
// mt_plan_build makes the object; --compare (plan_compare.c) makes one per profile.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "cli/commands.h"
#include "cli/plan_build.h"
#include "cli/run_setup.h"
#include "core/metrics.h"
#include "core/sysinfo.h"
#include "planner/planner.h"

static int fail(mt_status s) {
    fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
    return s == MT_ERR_ARG ? 2 : 1;
}

// Without --hardware: this machine's memory (MemTotal; the GPU when CUDA sees one), no rates.
static void this_machine(mt_hw_profile *hw) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "this-machine");
    snprintf(hw->source, sizeof hw->source, "/proc/meminfo");
    hw->host_mem_bytes = (double)mt_host_mem_total_bytes();
    mt_this_machine_gpu(hw->gpu_name, sizeof hw->gpu_name, &hw->hbm_bytes);
}

// Longest T (multiple of 1024, or below 1024 when even that does not fit) at
// batch B that fits; 0 when nothing does. Memory grows with T, so bisect.
static int max_context(const mt_config *c, mt_plan_input in, const mt_hw_profile *hw, int gpu_known) {
    mt_plan_memory m;
    mt_plan_fit f;
    long long cap = (1LL << 30) / in.eng.B;
    if (cap > (1LL << 24)) cap = 1LL << 24;
    long long lo = 0, hi = cap + 1; // fits(lo) (lo = 0: nothing yet), !fits(hi)
    while (hi - lo > 1) {
        long long mid = (lo + hi) / 2;
        in.eng.T = (int)mid;
        if (mt_plan_memory_compute(c, &in, &m) != MT_OK) {
            hi = mid;
            continue;
        }
        mt_plan_check_fit(&m, hw, &f);
        int ok = f.fits || (!gpu_known && f.n_short == 1 && !strcmp(f.shortfall[0].resource, "gpu"));
        if (ok) lo = mid;
        else hi = mid;
    }
    return lo >= 1024 ? (int)(lo / 1024 * 1024) : (int)lo;
}

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

mt_status mt_plan_build(const mt_options *o, cJSON **out, mt_plan_built *built) {
    mt_status s;
    *out = NULL;
    mt_config cfg;
    const char *cfg_src = o->model ? o->model : o->config;
    if (!cfg_src) return mt_fail(MT_ERR_ARG, "plan: --model DIR or --config FILE is required");
    if ((s = mt_setup_config(o, &cfg, 0)) || (s = mt_config_validate(&cfg, cfg_src))) return s;
    mt_plan_input in = {.eng = o->eng, .rollback_rate = o->rollback_rate}; // the options train and eval hand the engine
    if (o->rollback_rate > 1)
        return mt_fail(MT_ERR_ARG, "--rollback-rate: a fraction of steps, in [0, 1]; got %g", (double)o->rollback_rate);
    if ((s = mt_precision_parse(o->precision, &in.prec)) || (s = mt_attn_impl_parse(o->attention, &in.attention)))
        return s;
    const mt_schedule_desc *sd = in.eng.schedule;

    mt_hw_profile hw;
    int have_rates = o->hardware != NULL;
    if (have_rates) {
        if ((s = mt_hw_profile_resolve(o->hardware, &hw))) return s;
    } else {
        this_machine(&hw);
    }
    if (o->host_mem_gb > 0) hw.host_mem_bytes = (double)o->host_mem_gb * 1e9;
    if (hw.host_mem_bytes > 0) // the speculative step's spare blocks take only what the plan leaves
        in.eng.host_free = (size_t)(hw.host_mem_bytes * (1.0 - MT_PLAN_HOST_RESERVE));
    const mt_peer *peer = NULL;
    mt_peer_rate peer_rate;
    if (o->peer && (s = mt_peer_find(o->peer, &peer))) return s;
    if (peer && have_rates && (s = mt_peer_profile(peer, in.prec, &hw, &hw, &peer_rate))) return s;
    int gpu_known = hw.hbm_bytes > 0;
    if (gpu_known && hw.hbm_bytes > (double)MT_PLAN_GPU_RESERVE_BYTES)
        in.gpu_free_bytes = (size_t)(hw.hbm_bytes - (double)MT_PLAN_GPU_RESERVE_BYTES);

    mt_batch_search bs = {0};
    if (o->batch_auto) { // the planner picks the batch and the knobs; the plan below is that choice's
        if (!have_rates)
            return mt_fail(MT_ERR_ARG, "plan --batch auto: needs --hardware PROFILE (or measured) to price the "
                                           "candidates");
        char path[4096]; // the closed form's favourites are run in the sim where the profile is a file
        int sim = !peer && strcmp(o->hardware, "measured") && mt_hw_profile_find(o->hardware, path, sizeof path) == MT_OK;
        if ((s = mt_plan_batch_search(&cfg, &in, &hw, !o->given.recompute, sim ? path : NULL, &bs))) {
            mt_batch_search_free(&bs);
            return s;
        }
        mt_batch_candidate_apply(&bs.c[bs.best], &in.eng);
    }
    // Several GPUs or hosts (planner/ranks.c): --tokens-per-day picks them (--batch rows per GPU), --gpus/--hosts
    // name them (--batch global); the memory and the prediction below are then one rank's, the rates the ranks'.
    int gpus = o->gpus, hosts = o->hosts;
    cJSON *hold = cJSON_CreateObject(); // the search's object until the plan's exists
    if (!hold) return mt_fail(MT_ERR_MEMORY, "plan: out of memory");
    if (o->tokens_per_day > 0) {
        if ((s = mt_plan_tokens_per_day(&cfg, &in, &hw, o->tokens_per_day, hold, &gpus, &hosts))) {
            cJSON_Delete(hold);
            return s;
        }
        in.eng.B *= gpus * hosts;
    }
    const int several = gpus > 1 || hosts > 1;
    mt_plan_ranks rk;
    mt_plan_input in1 = in; // what one GPU computes: all of it, or one rank's rows
    if (several) {
        if ((s = mt_plan_ranks_predict(&cfg, &in, &hw, gpus, hosts, &rk))) {
            cJSON_Delete(hold);
            return s;
        }
        in1.eng.B = rk.rank_batch;
        if (hosts > 1) in1.eng.sched.speculative = 0; // off across hosts (cli/cmd_train.c)
    }
    mt_plan_memory mem;
    mt_plan_prediction pr;
    if ((s = mt_plan_memory_compute(&cfg, &in1, &mem)) ||
        (have_rates && !several && (s = mt_plan_predict(&cfg, &in1, &hw, &pr)))) {
        mt_batch_search_free(&bs);
        cJSON_Delete(hold);
        return s;
    }
    if (several) { // one host's memory (each host's: the state sharded) and the ranks' rates; the prediction is one rank's
        pr = rk.rank;
        mem.host_bytes = (size_t)rk.host0_bytes;
        mem.pinned_bytes = (size_t)rk.pinned_bytes_per_host;
        pr.step_ms = rk.step_ms;
        pr.tokens = (long long)rk.tokens;
        pr.tokens_per_s = rk.tokens_per_s;
        pr.tflops = rk.tflops;
        pr.mfu = rk.tflops_per_gpu / hw.peak_tflops[MT_PEAK_BF16]; // per GPU, as one GPU's
        pr.hfu = rk.rank.hfu * rk.rank.step_ms / rk.step_ms;
        pr.days_per_billion_tokens = mt_metric_days_per_billion_tokens(rk.tokens_per_s);
        pr.bound = rk.bound;
    }
    mt_plan_fit fit;
    mt_plan_check_fit(&mem, &hw, &fit);
    if (!gpu_known) { // no GPU figure to judge against: drop the gpu shortfall, say so
        int k = 0;
        for (int i = 0; i < fit.n_short; i++)
            if (strcmp(fit.shortfall[i].resource, "gpu")) fit.shortfall[k++] = fit.shortfall[i];
        fit.n_short = k;
        fit.fits = k == 0;
    }

    long long N = mt_config_params_total(&cfg);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "schema", "megatrain.plan/1");
    cJSON_AddStringToObject(j, "config", cfg_src);
    cJSON_AddStringToObject(j, "model_type", mt_arch_model_type(cfg.arch));
    add_num(j, "params", (double)N);
    add_num(j, "params_per_layer", (double)mt_config_params_per_layer(&cfg));
    add_num(j, "layers", cfg.num_layers);
    cJSON_AddStringToObject(j, "schedule", sd->name);
    cJSON_AddStringToObject(j, "precision", mt_precision_name(in.prec));
    add_num(j, "batch", in.eng.B);
    add_num(j, "seq_len", in.eng.T);
    add_num(j, "grad_accum", in.eng.grad_accum);
    if (sd->takes & MT_TAKES_CKPT_INTERVAL) add_num(j, "checkpoint_interval", in.eng.sched.ckpt_interval);
    if (sd->takes & MT_TAKES_WEIGHT_BUFS) add_num(j, "weight_buffers", in.eng.sched.weight_bufs);
    if (o->given.recompute || o->batch_auto) { // what the backward recomputes, auto resolved (docs/DESIGN.md#plan)
        cJSON_AddStringToObject(j, "recompute", mt_recompute_name(mem.engine.recompute));
        cJSON_AddStringToObject(j, "recompute_asked", o->batch_auto && !o->given.recompute
                                                          ? "auto (--batch auto)" : mt_recompute_name(o->eng.sched.recompute));
    }
    if (o->batch_auto) add_batch_search(j, &bs, &hw);
    if (several) mt_plan_ranks_json(j, &rk);
    cJSON *tpd = cJSON_DetachItemFromObject(hold, "tokens_per_day");
    if (tpd) cJSON_AddItemToObject(j, "tokens_per_day", tpd);
    cJSON_Delete(hold);
    mt_batch_search_free(&bs);
    mt_schedule_desc rs; // resolved: a peer binds as it does
    mt_schedule_resolve(sd, &in.eng.sched, &cfg, &rs);
    cJSON_AddStringToObject(j, "bind", rs.bind == MT_BIND_COPY ? "copy" : "pointer");
    add_num(j, "tokens_per_step", (double)in.eng.B * in.eng.T * in.eng.grad_accum);

    cJSON_AddBoolToObject(j, "fits", fit.fits);
    add_num(j, "host_bytes", (double)mem.host_bytes);
    add_num(j, "pinned_bytes", (double)mem.pinned_bytes);
    add_num(j, "gpu_bytes", (double)mem.gpu_bytes);
    add_num(j, "bytes_per_param", mem.host_bytes_per_param);
    if (fit.n_short) {
        cJSON *sh = cJSON_AddArrayToObject(j, "short");
        for (int i = 0; i < fit.n_short; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "resource", fit.shortfall[i].resource);
            add_num(e, "need_bytes", fit.shortfall[i].need_bytes);
            add_num(e, "have_bytes", fit.shortfall[i].have_bytes);
            cJSON_AddItemToArray(sh, e);
        }
    }
    if (have_rates) {
        add_num(j, "step_ms", pr.step_ms);
        add_num(j, "tokens_per_s", pr.tokens_per_s);
        add_num(j, "tflops", pr.tflops);
        add_num(j, "mfu", pr.mfu);
        if (!several) { // model FLOPs (core/METRICS.md): no input embedding, causal attention included
            double fpt = mt_metric_model_flops_per_token(
                mt_metric_params_model((double)N, cfg.vocab_size, cfg.hidden_size, cfg.tie_word_embeddings),
                cfg.num_layers, cfg.num_heads, cfg.head_dim, in.eng.T);
            double mtf = mt_metric_model_tflops(fpt, (double)in.eng.B * in.eng.T * in.eng.grad_accum, pr.step_ms);
            add_num(j, "model_flops_per_token", fpt);
            add_num(j, "model_tflops", mtf);
            add_num(j, "model_mfu", mt_metric_mfu(mtf, hw.peak_tflops[MT_PEAK_BF16]));
        }
        add_num(j, "hfu", pr.hfu);
        add_num(j, "days_per_billion_tokens", pr.days_per_billion_tokens);
        cJSON_AddStringToObject(j, "bound", pr.bound);
        cJSON *aj = cJSON_AddObjectToObject(j, "attention"); // as priced: which kernel, at what rate, from where
        cJSON_AddStringToObject(aj, "kernel", pr.attention_kernel);
        add_num(aj, "tflops", pr.attention_tflops);
        add_num(aj, "ms", pr.attention_ms);
        cJSON_AddStringToObject(aj, "source", pr.attention_source);
    }
    if (sd->takes & MT_TAKES_SPECULATIVE) { // the plan says whether the step speculates, and what a rollback costs
        cJSON *sp = cJSON_AddObjectToObject(j, "speculative");
        cJSON_AddBoolToObject(sp, "on", mem.engine.spec_window > 0);
        add_num(sp, "window_units", mem.engine.spec_window);
        add_num(sp, "spare_bytes", (double)mem.host_spare_bytes);
        if (have_rates && pr.spec_units) {
            add_num(sp, "rollback_rate", o->rollback_rate);
            add_num(sp, "step_ms_no_rollback", pr.step_ms_no_rollback);
            add_num(sp, "rollback_cost_ms", pr.rollback_cost_ms);
        }
    }
    if (!o->peer) { // the split (--device-optimizer): its units, bytes and step; off: what auto would give
        cJSON *dj = cJSON_AddObjectToObject(j, "device_optimizer");
        int want = o->eng.device_optimizer;
        char set[16];
        snprintf(set, sizeof set, "%d", want);
        cJSON_AddStringToObject(dj, "setting", want < 0 ? "auto" : want == 0 ? "off" : set);
        add_num(dj, "units", pr.devopt_units);
        add_num(dj, "gpu_bytes", (double)mem.devopt_gpu_bytes);
        if (have_rates) {
            add_num(dj, "params", pr.devopt_params);
            add_num(dj, "adamw_ms", pr.devopt_adamw_ms);
            add_num(dj, "step_ms_off", pr.step_ms_split_off);
            if (want == 0) {
                cJSON *aj = cJSON_AddObjectToObject(dj, "auto");
                add_num(aj, "units", pr.devopt_auto_units);
                add_num(aj, "gpu_bytes", pr.devopt_auto_gpu_bytes);
                add_num(aj, "step_ms", pr.devopt_auto_step_ms);
            }
        }
    }
    if (sd->takes & MT_TAKES_ROWS_FIRST) { // the embedding's rows first: on, how many rows a step may stage, its bytes
        cJSON *rf = cJSON_AddObjectToObject(j, "embedding_rows_first");
        cJSON_AddBoolToObject(rf, "on", mem.engine.rows_cap > 0);
        add_num(rf, "stage_rows", (double)mem.engine.rows_cap);
        add_num(rf, "host_bytes", (double)mem.engine.rows_bytes);
    }
    if (o->max_context) {
        add_num(j, "max_seq_len", max_context(&cfg, in1, &hw, gpu_known));
        add_num(j, "max_position_embeddings", cfg.max_position_embeddings);
    }

    cJSON *h = cJSON_AddObjectToObject(j, "host");
    add_num(h, "state_bytes", (double)mem.host_state_bytes);
    add_num(h, "staging_bytes", (double)mem.host_staging_bytes);
    add_num(h, "spare_bytes", (double)mem.host_spare_bytes);
    cJSON_AddStringToObject(h, "accounting", mem.host_accounting);
    add_num(h, "mem_bytes", hw.host_mem_bytes);
    add_num(h, "reserve_fraction", MT_PLAN_HOST_RESERVE);
    add_num(h, "have_bytes", fit.host_have_bytes);
    if (sd->host_bytes_per_param[in.prec] && (sd->takes & MT_TAKES_ZERO3)) { // the real system's own accounting, beside what our schedule allocates
        add_num(h, "deepspeed_estimator_bytes", 1.5 * (double)sd->host_bytes_per_param[in.prec] * (double)N);
        add_num(h, "engine_zero3_bytes", (double)mem.engine.host_bytes);
        add_num(j, "deepspeed_gpu_bytes", (double)mem.deepspeed_gpu_bytes);
    }
    cJSON *g = cJSON_AddObjectToObject(j, "gpu");
    add_num(g, "weights_bytes", (double)mem.engine.weights.device);
    add_num(g, "grads_bytes", (double)mem.engine.grads.device);
    add_num(g, "checkpoint_bytes", (double)mem.engine.checkpoints.device);
    add_num(g, "activation_bytes", (double)mem.engine.activations.device);
    // Layer-boundary checkpoints: on the device, or offloaded to pinned host memory (3 device slots).
    cJSON_AddStringToObject(g, "checkpoints", mem.engine.offload_checkpoints ? "host" : "device");
    // How chunked weight gradients (MLP, LM head) are summed: f32 (an f32 buffer, one rounding) or bf16
    // (one rounding per chunk, the official code's way); auto takes f32 where the device plan fits.
    cJSON_AddStringToObject(g, "grad_accum_dtype", mem.engine.grad_sum_f32 ? "f32" : "bf16");
    add_num(g, "grad_accum_bytes", (double)mem.engine.grad_sum_bytes);
    if (mem.engine.offload_checkpoints) add_num(h, "checkpoint_bytes", (double)mem.engine.checkpoints.host);
    if (gpu_known) {
        add_num(g, "mem_bytes", hw.hbm_bytes);
        add_num(g, "reserve_bytes", (double)MT_PLAN_GPU_RESERVE_BYTES);
        add_num(g, "have_bytes", fit.gpu_have_bytes);
    }
    cJSON_AddBoolToObject(g, "checked", gpu_known);
    if (sd->takes & MT_TAKES_ZERO3) {
        const mt_zero3_knobs *zk = &in.eng.sched.zero3;
        cJSON *z = cJSON_AddObjectToObject(j, "zero3");
        cJSON_AddBoolToObject(z, "pin_memory", zk->pin_memory);
        cJSON_AddBoolToObject(z, "overlap_comm", zk->overlap_comm);
        add_num(z, "stage3_prefetch_bucket_size", (double)zk->prefetch_bucket_size);
        add_num(z, "stage3_param_persistence_threshold", (double)zk->param_persistence_threshold);
        add_num(z, "reduce_bucket_size", (double)zk->reduce_bucket_size);
        add_num(z, "stage3_max_live_parameters", (double)zk->max_live_parameters);
    }

    if (peer) { // what only the peer has (engine/peer.h; sources in baselines/PEERS.md)
        cJSON *pj = cJSON_AddObjectToObject(j, "peer");
        cJSON_AddStringToObject(pj, "name", peer->name);
        cJSON_AddStringToObject(pj, "what", peer->summary);
        cJSON_AddStringToObject(pj, "schedule_base", peer->like);
        add_num(pj, "host_bytes_per_param", rs.host_bytes_per_param[in.prec]);
        add_num(pj, "checkpoint_interval", rs.ckpt_interval);
        add_num(pj, "weight_passes", rs.weight_passes == 3 ? 3 : 2);
        add_num(pj, "weight_buffers", rs.weight_bufs);
        cJSON_AddStringToObject(pj, "fetch", rs.submodule_fetch ? "submodule" : "layer");
        add_num(pj, "fetch_overhead_ms", rs.fetch_overhead_ms);
        cJSON_AddStringToObject(pj, "fetch_overhead_source", peer->hook_source);
        add_num(pj, "eager_scale", rs.eager_scale > 0 ? rs.eager_scale : 1);
        cJSON_AddStringToObject(pj, "param_wire", rs.param_wire_f32 && in.prec == MT_PREC_MIXED ? "f32" : in.prec == MT_PREC_FP32 ? "f32" : "bf16");
        cJSON_AddStringToObject(pj, "grad_wire", rs.grad_wire_f32 || in.prec == MT_PREC_FP32 ? "f32" : "bf16");
        cJSON_AddStringToObject(pj, "optimizer", peer->opt.what);
        cJSON_AddStringToObject(pj, "optimizer_impl", peer->opt.impl);
        cJSON_AddStringToObject(pj, "optimizer_when", rs.optimizer_overlapped ? "overlapped" : "after backward (serial)");
        add_num(pj, "optimizer_bytes_per_param", peer->opt.bytes_per_param);
        add_num(pj, "host_pass_bytes_per_param", peer->opt.host_pass_bytes[in.prec]);
        if (have_rates) {
            add_num(pj, "optimizer_update_params_per_s", peer_rate.update_params_per_s);
            add_num(pj, "optimizer_params_per_s", peer_rate.params_per_s);
            cJSON_AddStringToObject(pj, "optimizer_rate_source", peer_rate.source);
        }
    }

    cJSON *hwj = cJSON_AddObjectToObject(j, "hardware");
    cJSON_AddStringToObject(hwj, "name", hw.name);
    cJSON_AddStringToObject(hwj, "source", hw.source);
    if (hw.gpu_name[0]) cJSON_AddStringToObject(hwj, "gpu", hw.gpu_name);
    if (hw.measured) cJSON_AddStringToObject(hwj, "note", hw.measured_note);
    if (!have_rates)
        cJSON_AddStringToObject(hwj, "note", gpu_known ? "no --hardware: this machine's memory, no speed prediction"
                                                       : "no --hardware: this machine's host memory; no GPU visible, so "
                                                         "GPU memory is not checked; no speed prediction");
    if (o->host_mem_gb > 0) add_num(hwj, "host_mem_override_gb", o->host_mem_gb);

    if (have_rates) {
        cJSON *p = cJSON_AddObjectToObject(j, "prediction");
        cJSON_AddStringToObject(p, "model", pr.model);
        cJSON_AddStringToObject(p, "formula", pr.formula);
        cJSON_AddStringToObject(p, "flops_convention",
                                "executed = 6*P_mm + 12*L*dA*T (PaLM attention) + recompute 2*L*P_L + 4*L*dA*T per "
                                "token, P_mm = layer params + lm_head (embedding gather excluded); tflops and mfu use "
                                "6*N_all (docs/DESIGN.md#metrics), mfu and hfu against the bf16 dense peak");
        add_num(p, "compute_ms", pr.compute_ms);
        add_num(p, "h2d_ms", pr.h2d_ms);
        add_num(p, "d2h_ms", pr.d2h_ms);
        add_num(p, "optimizer_ms", pr.optimizer_ms);
        add_num(p, "gpu_idle_ms", pr.exposed_ms);
        add_num(p, "h2d_bytes", pr.h2d_bytes);
        add_num(p, "d2h_bytes", pr.d2h_bytes);
        add_num(p, "flops_6n", pr.flops_6n);
        add_num(p, "flops_executed", pr.flops_executed);
        add_num(p, "peak_tflops", hw.peak_tflops[in.prec == MT_PREC_FP32 ? MT_PEAK_FP32 : MT_PEAK_BF16]);
        add_num(p, "gemm_efficiency", hw.gemm_efficiency);
        if (hw.gemm_bwd_efficiency > 0 && in.prec != MT_PREC_FP32) // measured: the backward GEMMs' (predict.c)
            add_num(p, "gemm_bwd_efficiency", hw.gemm_bwd_efficiency);
    }
    if (built) { // what --compare prices further (the sim's step) and labels
        built->cfg = cfg;
        built->in = in;
        built->hw = hw;
        built->fits = fit.fits;
        built->peer = peer != NULL;
        built->profile_path[0] = 0;
        if (have_rates && strcmp(o->hardware, "measured") &&
            mt_hw_profile_find(o->hardware, built->profile_path, sizeof built->profile_path) != MT_OK)
            built->profile_path[0] = 0;
    }
    *out = j;
    return MT_OK;
}

int mt_cmd_plan(mt_options *o) {
    if (o->compare) return mt_cmd_plan_compare(o);
    cJSON *j;
    mt_status s = mt_plan_build(o, &j, NULL);
    if (s) return fail(s);
    if (!mt_json_on_stdout(o)) { // a person reads stdout: the summary (the JSON: --json, or a pipe)
        mt_plan_print_summary(stdout, j);
        cJSON_Delete(j);
        return 0;
    }
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!txt) return fail(mt_fail(MT_ERR_MEMORY, "plan: cannot format the JSON output"));
    printf("%s\n", txt);
    free(txt);
    return 0;
}
