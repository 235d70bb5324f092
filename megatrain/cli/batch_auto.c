// batch_auto.c: `train --batch auto` (batch_auto.h).
#include "backend/backend_registry.h"
#include "cli/batch_auto.h"

#include <stdio.h>

#include "planner/planner.h"

mt_status mt_setup_batch_auto(mt_options *o, const mt_config *c, mt_precision p) {
    unsigned caps = mt_backend_caps_of(o->backend); // one with device memory (mt_options_check)
    mt_hw_profile hw;
    MT_TRY(mt_hw_profile_resolve(o->hardware ? o->hardware : "measured", &hw));
    mt_plan_input in = {.eng = o->eng, .prec = p};
    MT_TRY(mt_attn_impl_parse(o->attention, &in.attention));
    in.eng.host_free = (size_t)(hw.host_mem_bytes * (1.0 - MT_PLAN_HOST_RESERVE));
    if (hw.hbm_bytes > (double)MT_PLAN_GPU_RESERVE_BYTES)
        in.gpu_free_bytes = (size_t)(hw.hbm_bytes - (double)MT_PLAN_GPU_RESERVE_BYTES);
    mt_batch_search bs;
    char path[4096]; // under the sim, its profile checks the closed form's favourites
    int sim = o->hardware && !o->peer && (caps & MT_CAP_VIRTUAL_TIME) &&
              mt_hw_profile_find(o->hardware, path, sizeof path) == MT_OK;
    MT_TRY(mt_plan_batch_search(c, &in, &hw, !o->given.recompute, sim ? path : NULL, &bs));
    mt_batch_candidate_apply(&bs.c[bs.best], &o->eng);
    char why[512];
    mt_batch_search_why(&bs, &hw, why, sizeof why);
    fprintf(stderr, "megatrain: --batch auto: %s (`megatrain plan --batch auto` lists them)\n", why);
    mt_batch_search_free(&bs);
    return MT_OK;
}
