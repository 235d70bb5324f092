// plan_build.c: the plan step of `megatrain plan`: the memory a configuration needs (host,
// pinned, GPU), whether it fits, and with a profile the predicted step, for one GPU or for
// --gpus/--hosts ranks; --batch auto's and --tokens-per-day's searches first. Not fitting
// is a result ("fits": false); bad input is an error. The JSON: plan_json.c.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "core/sysinfo.h"
#include "planner/plan_build.h"

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

// The profile, the peer and the GPU left free: what every plan is priced against.
static mt_status machine(const mt_plan_request *rq, mt_plan_built *b) {
    if (b->have_rates) MT_TRY(mt_hw_profile_resolve(rq->hardware, &b->hw));
    else this_machine(&b->hw);
    if (rq->host_mem_gb > 0) b->hw.host_mem_bytes = (double)rq->host_mem_gb * 1e9;
    if (rq->nic_gbps > 0) b->hw.multi.nic_gbps = rq->nic_gbps;
    if (b->hw.host_mem_bytes > 0) // the speculative step's spare blocks take only what the plan leaves
        b->in.eng.host_free = (size_t)(b->hw.host_mem_bytes * (1.0 - MT_PLAN_HOST_RESERVE));
    if (rq->peer) MT_TRY(mt_peer_find(rq->peer, &b->peer));
    if (b->peer && b->have_rates) MT_TRY(mt_peer_profile(b->peer, b->in.prec, &b->hw, &b->hw, &b->peer_rate));
    b->gpu_known = b->hw.hbm_bytes > 0;
    if (b->in.backend_caps) { // plan --backend cpu: its "device" is the host's memory (as train's), not a GPU here
        b->gpu_known = 0;
        b->in.gpu_free_bytes = b->in.eng.host_free;
        return MT_OK;
    }
    if (b->gpu_known && b->hw.hbm_bytes > (double)MT_PLAN_GPU_RESERVE_BYTES)
        b->in.gpu_free_bytes = (size_t)(b->hw.hbm_bytes - (double)MT_PLAN_GPU_RESERVE_BYTES);
    return MT_OK;
}

// Several GPUs or hosts: one host's memory (each host's: the state sharded) and the ranks'
// rates; the prediction is one rank's.
static void ranks_apply(mt_plan_built *b) {
    const mt_plan_ranks *rk = &b->rk;
    mt_plan_prediction *pr = &b->pr;
    *pr = rk->rank;
    b->mem.host_bytes = (size_t)rk->host0_bytes;
    b->mem.pinned_bytes = (size_t)rk->pinned_bytes_per_host;
    b->mem.device_in_host *= rk->gpus; // cpu ranks: each its own buffers and scratch in the host's memory
    pr->step_ms = rk->step_ms;
    pr->tokens = (long long)rk->tokens;
    pr->tokens_per_s = rk->tokens_per_s;
    pr->tflops = rk->tflops;
    pr->mfu = rk->tflops_per_gpu / b->hw.peak_tflops[MT_PEAK_BF16]; // per GPU, as one GPU's
    pr->hfu = rk->rank.hfu * rk->rank.step_ms / rk->step_ms;
    pr->days_per_billion_tokens = mt_metric_days_per_billion_tokens(rk->tokens_per_s);
    pr->bound = rk->bound;
}

mt_status mt_plan_build(const mt_config *cfg, const mt_plan_request *rq, mt_plan_built *b) {
    memset(b, 0, sizeof *b);
    b->rq = *rq;
    b->cfg = *cfg;
    b->in = rq->in; // the options train and eval hand the engine
    if (rq->in.rollback_rate > 1)
        return mt_fail(MT_ERR_ARG, "--rollback-rate: a fraction of steps, in [0, 1]; got %g",
                       (double)rq->in.rollback_rate);
    MT_TRY(mt_precision_parse(rq->precision, &b->in.prec));
    MT_TRY(mt_attn_impl_parse(rq->attention, &b->in.attention));
    b->have_rates = rq->hardware != NULL;
    MT_TRY(machine(rq, b));

    if (rq->batch_auto) { // the planner picks the batch and the knobs; the plan below is that choice's
        if (!b->have_rates)
            return mt_fail(MT_ERR_ARG, "plan --batch auto: needs --hardware PROFILE (or measured) to price the "
                                       "candidates");
        char path[4096]; // the closed form's favourites are run in the sim where the profile is a file
        int sim = !b->peer && strcmp(rq->hardware, "measured") &&
                  mt_hw_profile_find(rq->hardware, path, sizeof path) == MT_OK;
        MT_TRY(mt_plan_batch_search(cfg, &b->in, &b->hw, !rq->recompute_given, sim ? path : NULL, &b->bs));
        mt_batch_candidate_apply(&b->bs.c[b->bs.best], &b->in.eng);
    }
    // Several GPUs or hosts (planner/ranks.c): --tokens-per-day picks them (--batch rows per GPU), --gpus/--hosts
    // name them (--batch global); the memory and the prediction below are then one rank's, the rates the ranks'.
    int gpus = rq->gpus, hosts = rq->hosts;
    if (rq->tokens_per_day > 0) {
        MT_TRY(mt_plan_tokens_per_day(cfg, &b->in, &b->hw, rq->tokens_per_day, &b->tpd));
        gpus = b->tpd.gpus, hosts = b->tpd.hosts;
        b->in.eng.B *= gpus * hosts;
    }
    b->several = gpus > 1 || hosts > 1;
    b->in1 = b->in;
    if (b->several) {
        MT_TRY(mt_plan_ranks_predict(cfg, &b->in, &b->hw, gpus, hosts, &b->rk));
        b->in1.eng.B = b->rk.rank_batch;
        if (hosts > 1) b->in1.eng.sched.speculative = 0; // off across hosts (cli/cmd_train.c)
    }
    MT_TRY(mt_plan_memory_compute(cfg, &b->in1, &b->mem));
    if (b->have_rates && !b->several) MT_TRY(mt_plan_predict(cfg, &b->in1, &b->hw, &b->pr));
    if (b->several) ranks_apply(b);
    mt_plan_check_fit(&b->mem, &b->hw, &b->fit);
    if (!b->gpu_known) { // no GPU figure to judge against: drop the gpu shortfall, say so
        mt_plan_fit *fit = &b->fit;
        int k = 0;
        for (int i = 0; i < fit->n_short; i++)
            if (strcmp(fit->shortfall[i].resource, "gpu")) fit->shortfall[k++] = fit->shortfall[i];
        fit->n_short = k;
        fit->fits = k == 0;
    }
    b->fits = b->fit.fits;
    mt_schedule_resolve(rq->in.eng.schedule, &b->in.eng.sched, cfg, &b->rs);
    if (rq->max_context) b->max_seq_len = max_context(cfg, b->in1, &b->hw, b->gpu_known);
    if (b->have_rates && strcmp(rq->hardware, "measured") &&
        mt_hw_profile_find(rq->hardware, b->profile_path, sizeof b->profile_path) != MT_OK)
        b->profile_path[0] = 0;
    return MT_OK;
}

void mt_plan_built_free(mt_plan_built *b) {
    mt_batch_search_free(&b->bs);
    mt_plan_tpd_search_free(&b->tpd);
}
