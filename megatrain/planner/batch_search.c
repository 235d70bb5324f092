// batch_search.c: `--batch auto`: the batch, the recompute policy, the checkpoint
// interval and the weight buffers that maximise the predicted tokens/s within the
// machine's host and device memory. Per combination of the knobs the schedule
// takes, the largest batch that fits is bisected (memory grows with the batch),
// then every power of two below it and it are priced (mt_plan_predict); the
// candidates are kept so that `plan` can show what it compared.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

static mt_status add(mt_batch_search *s, const mt_batch_candidate *c) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        mt_batch_candidate *p = realloc(s->c, sizeof *p * (size_t)cap);
        if (!p) return mt_fail(MT_ERR_MEMORY, "host memory: the batch candidates");
        s->c = p;
        s->cap = cap;
    }
    s->c[s->n++] = *c;
    return MT_OK;
}

// Memory and fit of `in` (its B and knobs); 0 when it does not validate or fit.
static int fits(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, mt_plan_memory *m) {
    mt_plan_fit f;
    if (mt_plan_memory_compute(c, in, m) != MT_OK) return 0;
    mt_plan_check_fit(m, hw, &f);
    return f.fits;
}

// The largest B that fits with these knobs (0: not even 1).
static int max_batch(const mt_config *c, mt_plan_input in, const mt_hw_profile *hw) {
    mt_plan_memory m;
    long long lo = 0, hi = (1LL << 30) / in.eng.T + 1; // fits(lo) (0: nothing yet), !fits(hi) (the engine's limit)
    if (hi > (1LL << 24)) hi = 1LL << 24;
    while (hi - lo > 1) {
        long long mid = lo + (hi - lo) / 2;
        in.eng.B = (int)mid;
        if (fits(c, &in, hw, &m)) lo = mid;
        else hi = mid;
    }
    return (int)lo;
}

static mt_status price(const mt_config *c, mt_plan_input in, const mt_hw_profile *hw, int B, mt_batch_search *s) {
    mt_plan_memory m;
    mt_plan_prediction p;
    in.eng.B = B;
    if (!fits(c, &in, hw, &m)) return MT_OK;
    MT_TRY(mt_plan_predict(c, &in, hw, &p));
    mt_batch_candidate k = {.B = B, .recompute = m.engine.recompute, .ckpt_interval = in.eng.sched.ckpt_interval,
                            .weight_bufs = in.eng.sched.weight_bufs, .offload_checkpoints = m.engine.offload_checkpoints,
                            .gpu_bytes = (double)m.gpu_bytes, .host_bytes = (double)m.host_bytes,
                            .step_ms = p.step_ms, .tokens_per_s = p.tokens_per_s, .bound = p.bound};
    MT_TRY(add(s, &k));
    if (s->best < 0 || k.tokens_per_s > s->c[s->best].tokens_per_s) s->best = s->n - 1;
    return MT_OK;
}

void mt_batch_candidate_apply(const mt_batch_candidate *b, mt_engine_opts *o) {
    unsigned takes = o->schedule->takes;
    o->B = b->B;
    if (takes & MT_TAKES_RECOMPUTE) o->sched.recompute = b->recompute;
    if (takes & MT_TAKES_CKPT_INTERVAL) o->sched.ckpt_interval = b->ckpt_interval;
    if (takes & MT_TAKES_WEIGHT_BUFS) o->sched.weight_bufs = b->weight_bufs;
}

// The closed form's best few of each recompute policy, each run on the sim (its knobs and
// batch); the sim's best is the choice. Per policy, since the closed form errs by policy
// (optimistic most where kept activations fill the device).
static mt_status sim_check(const mt_config *c, const mt_plan_input *in0, const char *profile, mt_batch_search *s) {
    int best = -1;
    for (int k = 0; k < MT_BATCH_SIM_CHECKED * (MT_RECOMPUTE_NONE + 1); k++) {
        int top = -1, r = k % (MT_RECOMPUTE_NONE + 1); // policy r's next best by the closed form not yet checked
        for (int i = 0; i < s->n; i++)
            if (s->c[i].recompute == (mt_recompute)r && !s->c[i].sim_step_ms &&
                (top < 0 || s->c[i].tokens_per_s > s->c[top].tokens_per_s))
                top = i;
        if (top < 0) continue;
        mt_batch_candidate *b = &s->c[top];
        mt_plan_input in = *in0;
        mt_batch_candidate_apply(b, &in.eng);
        MT_TRY(mt_plan_sim_step_ms(c, &in, profile, &b->sim_step_ms));
        b->sim_tokens_per_s = (double)b->B * in.eng.T * in.eng.grad_accum / b->sim_step_ms * 1e3;
        if (best < 0 || b->sim_tokens_per_s > s->c[best].sim_tokens_per_s) best = top;
        s->n_sim++;
    }
    if (best >= 0) s->best = best;
    return MT_OK;
}

mt_status mt_plan_batch_search(const mt_config *c, const mt_plan_input *in0, const mt_hw_profile *hw, int vary_recompute,
                               const char *sim_profile, mt_batch_search *s) {
    memset(s, 0, sizeof *s);
    s->best = -1;
    if (!(hw->hbm_bytes > 0))
        return mt_fail(MT_ERR_ARG, "--batch auto: the hardware profile %s gives no GPU memory to fit the batch in",
                       hw->name);
    const mt_schedule_desc *sd = in0->eng.schedule;
    mt_recompute policies[MT_RECOMPUTE_NONE + 1] = {in0->eng.sched.recompute};
    int n_pol = 1;
    if ((sd->takes & MT_TAKES_RECOMPUTE) && (vary_recompute || in0->eng.sched.recompute == MT_RECOMPUTE_AUTO)) {
        for (int r = MT_RECOMPUTE_FULL; r <= MT_RECOMPUTE_NONE; r++) policies[r] = (mt_recompute)r;
        n_pol = MT_RECOMPUTE_NONE + 1;
    }
    const int Ks[] = {1, 2, 4}, bufs[] = {2, 3};
    for (int pi = 0; pi < n_pol; pi++) {
        // K matters only where layer inputs are checkpointed (full); a fixed K where the schedule fixes it.
        int full = policies[pi] == MT_RECOMPUTE_FULL || !(sd->takes & MT_TAKES_RECOMPUTE);
        int nK = (sd->takes & MT_TAKES_CKPT_INTERVAL) && full ? 3 : 1;
        int nW = (sd->takes & MT_TAKES_WEIGHT_BUFS) ? 2 : 1;
        for (int ki = 0; ki < nK; ki++) {
            for (int wi = 0; wi < nW; wi++) {
                mt_plan_input in = *in0;
                in.eng.sched.recompute = policies[pi];
                if (nK > 1) in.eng.sched.ckpt_interval = Ks[ki];
                else if (sd->takes & MT_TAKES_RECOMPUTE && !full) in.eng.sched.ckpt_interval = 1;
                if (in.eng.sched.ckpt_interval > c->num_layers) continue;
                if (nW > 1) in.eng.sched.weight_bufs = bufs[wi];
                int bmax = max_batch(c, in, hw);
                if (bmax > s->max_fit_B) s->max_fit_B = bmax;
                for (int B = 1; B < bmax; B *= 2) MT_TRY(price(c, in, hw, B, s));
                if (bmax > 0) MT_TRY(price(c, in, hw, bmax, s));
            }
        }
    }
    if (s->best < 0)
        return mt_fail(MT_ERR_ARG, "--batch auto: not even batch 1 x %d tokens fits %s (host %.0f GB, GPU %.0f GB); "
                                   "HINT: a shorter --seq-len, --precision paper, or `megatrain plan --batch 1`",
                       in0->eng.T, hw->name, hw->host_mem_bytes / 1e9, hw->hbm_bytes / 1e9);
    return sim_profile ? sim_check(c, in0, sim_profile, s) : MT_OK;
}

void mt_batch_search_free(mt_batch_search *s) {
    free(s->c);
    memset(s, 0, sizeof *s);
}

// A candidate's rate as the choice was made: the sim's where it ran, else the closed form's.
static double rate(const mt_batch_search *s, const mt_batch_candidate *k) {
    return s->n_sim ? k->sim_tokens_per_s : k->tokens_per_s;
}

void mt_batch_search_why(const mt_batch_search *s, const mt_hw_profile *hw, char *buf, size_t cap) {
    const mt_batch_candidate *b = &s->c[s->best], *next = NULL, *biggest = NULL;
    for (int i = 0; i < s->n; i++) {
        const mt_batch_candidate *k = &s->c[i];
        if (i != s->best && (!next || rate(s, k) > rate(s, next))) next = k;
        if (!biggest || k->B > biggest->B) biggest = k;
    }
    int n = snprintf(buf, cap,
                     "batch %d, --recompute %s, --checkpoint-interval %d, --weight-buffers %d: %.0f tokens/s %s on %s "
                     "(%s-bound; GPU %.1f of %.1f GB, host %.1f of %.1f GB), the most of %d candidates that fit",
                     b->B, mt_recompute_name(b->recompute), b->ckpt_interval, b->weight_bufs, rate(s, b),
                     s->n_sim ? "in the sim" : "predicted", hw->name, b->bound, b->gpu_bytes / 1e9,
                     (hw->hbm_bytes - (double)MT_PLAN_GPU_RESERVE_BYTES) / 1e9, b->host_bytes / 1e9,
                     hw->host_mem_bytes * (1.0 - MT_PLAN_HOST_RESERVE) / 1e9, s->n);
    if (s->n_sim && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " (the closed form's best %d run in the sim; it predicted %.0f)",
                      s->n_sim, b->tokens_per_s);
    if (next && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "; next best batch %d with --recompute %s, K %d, %d buffers: %.0f tokens/s",
                      next->B, mt_recompute_name(next->recompute), next->ckpt_interval, next->weight_bufs, rate(s, next));
    if (biggest && biggest != b && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "; the largest batch that fits, %d (--recompute %s), %.0f tokens/s predicted",
                 biggest->B, mt_recompute_name(biggest->recompute), biggest->tokens_per_s);
}
