// plan_request.c: `megatrain plan`'s options as the planner's request: the model loaded
// (--model or --config), then the plan step and the JSON step (planner/plan_build.h).
#include <string.h>

#include "backend/backend_registry.h"
#include "cli/plan_request.h"
#include "cli/run_setup.h"

mt_status mt_plan_of_options(const mt_options *o, cJSON **out, mt_plan_built *built) {
    *out = NULL;
    memset(built, 0, sizeof *built);
    mt_config cfg;
    const char *cfg_src = o->model ? o->model : o->config;
    if (!cfg_src) return mt_fail(MT_ERR_ARG, "plan: --model DIR or --config FILE is required");
    MT_TRY(mt_setup_config(o, &cfg, 0));
    MT_TRY(mt_config_validate(&cfg, cfg_src));
    // --backend cpu named: the plan is that backend's (auto stays machine-independent: a GPU's).
    unsigned caps = strcmp(o->backend, "auto") ? mt_backend_caps_of(o->backend) : 0;
    mt_plan_request rq = {
        .config_src = cfg_src,
        .in = {.eng = o->eng, // the options train and eval hand the engine
               .rollback_rate = o->rollback_rate,
               .backend_caps = (caps & MT_CAP_TENSOR_DATA) && !(caps & MT_CAP_DEVICE_MEMORY) ? caps : 0},
        .precision = o->precision,
        .attention = o->attention,
        .hardware = o->hardware,
        .host_mem_gb = o->host_mem_gb,
        .nic_gbps = o->nic_gbps,
        .peer = o->peer,
        .batch_auto = o->batch_auto,
        .recompute_given = o->given.recompute,
        .tokens_per_day = o->tokens_per_day,
        .gpus = o->gpus,
        .hosts = o->hosts,
        .max_context = o->max_context,
    };
    MT_TRY(mt_plan_build(&cfg, &rq, built));
    return mt_plan_json(built, out);
}
