// sim_price.c: one configuration's step priced by the sim backend: the engine's
// own walk over the parts in virtual time on a hardware profile (no data). What
// --batch auto checks its closed-form favourites with: the analytic model leaves
// out what the walk shows (the loss head at its floor chunk when the device is
// full, the elementwise passes, the speculative window as the engine sizes it).
#include <stdlib.h>

#include "backend/backend_registry.h"
#include "planner/planner.h"

// The registry's virtual-time backend (by its capabilities, not its name) on the profile.
static mt_status virtual_backend(const char *profile_path, mt_dtype act, mt_backend **out) {
    *out = NULL;
    for (int i = 0; i < mt_backend_count(); i++) {
        const mt_backend_entry *e = mt_backend_at(i);
        if ((e->caps & MT_CAP_VIRTUAL_TIME) && !(e->caps & MT_CAP_TENSOR_DATA)) {
            mt_backend_args a = {act, profile_path, 0};
            return e->create(&a, out);
        }
    }
    return mt_fail(MT_ERR_UNSUPPORTED, "plan: no virtual-time backend is compiled in to price a step");
}

mt_status mt_plan_sim_step_ms(const mt_config *c, const mt_plan_input *in, const char *profile_path, double *step_ms) {
    mt_dtype act = in->prec == MT_PREC_FP32 ? MT_F32 : MT_BF16;
    mt_backend *be = NULL;
    MT_TRY(virtual_backend(profile_path, act, &be));
    mt_schedule_desc sd;
    mt_schedule_resolve(in->eng.schedule, &in->eng.sched, c, &sd);
    mt_model m = {0};
    mt_engine *e = NULL;
    int32_t *tok = calloc((size_t)in->eng.grad_accum * in->eng.B * in->eng.T, sizeof *tok);
    mt_status s = tok ? mt_backend_set_attention(be, in->attention) : mt_fail(MT_ERR_MEMORY, "host memory: tokens");
    if (s == MT_OK) s = mt_model_alloc_ex(&m, c, in->prec, be, sd.host_pinned);
    if (s == MT_OK) s = mt_engine_create(&m, be, &in->eng, &e);
    // The median of steps 3-7, as a run reports it (docs/DESIGN.md#metrics): the first two pay the
    // fill and the first overlapped optimizer; later steps differ as the speculative step settles.
    mt_optim_hparams hp = {3e-4f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    double ms[7];
    for (int step = 1; step <= 7 && s == MT_OK; step++) {
        mt_step_stats st;
        double t0 = mt_engine_now_ms(e);
        s = mt_engine_step(e, tok, tok, &hp, 3e-4f, step, &st);
        ms[step - 1] = mt_engine_now_ms(e) - t0;
    }
    if (s == MT_OK) { // sort steps 3..7 (five) and take the middle one
        for (int i = 3; i < 7; i++)
            for (int j = i; j > 2 && ms[j] < ms[j - 1]; j--) {
                double t = ms[j];
                ms[j] = ms[j - 1];
                ms[j - 1] = t;
            }
        *step_ms = ms[4];
    }
    if (e) mt_engine_finish(e);
    mt_engine_destroy(e);
    if (m.units) mt_model_free(&m);
    free(tok);
    mt_backend_destroy(be);
    return s;
}
