// sim_price.c: one configuration's step priced by the sim backend: the engine's
// own walk over the parts in virtual time on a hardware profile (no data). What
// --batch auto checks its closed-form favourites with: the analytic model leaves
// out what the walk shows (the loss head at its floor chunk when the device is
// full, the elementwise passes, the speculative window as the engine sizes it).
#include <stdlib.h>

#include "backends/sim/sim.h"
#include "planner/planner.h"

mt_status mt_plan_sim_step_ms(const mt_config *c, const mt_plan_input *in, const char *profile_path, double *step_ms) {
    mt_dtype act = in->prec == MT_PREC_FP32 ? MT_F32 : MT_BF16;
    mt_backend *be = NULL;
    MT_TRY(mt_backend_sim_create(profile_path, act, &be));
    mt_schedule_desc sd;
    mt_schedule_resolve(in->eng.schedule, &in->eng.sched, c, &sd);
    mt_model m = {0};
    mt_engine *e = NULL;
    int32_t *tok = calloc((size_t)in->eng.grad_accum * in->eng.B * in->eng.T, sizeof *tok);
    mt_status s = tok ? mt_backend_set_attention(be, in->attention) : mt_fail(MT_ERR_MEMORY, "host memory: tokens");
    if (s == MT_OK) s = mt_model_alloc_ex(&m, c, in->prec, be, sd.host_pinned);
    if (s == MT_OK) s = mt_engine_create(&m, be, &in->eng, &e);
    // Step 3: the first pays the fill, the second the first overlapped optimizer (as train's median skips them).
    mt_optim_hparams hp = {3e-4f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    for (int step = 1; step <= 3 && s == MT_OK; step++) {
        mt_step_stats st;
        double t0 = mt_engine_now_ms(e);
        s = mt_engine_step(e, tok, tok, &hp, 3e-4f, step, &st);
        *step_ms = mt_engine_now_ms(e) - t0;
    }
    if (e) mt_engine_finish(e);
    mt_engine_destroy(e);
    if (m.units) mt_model_free(&m);
    free(tok);
    mt_backend_destroy(be);
    return s;
}
