// test_plan_copy_bind.c: `--bind copy` costs one more layer-sized device buffer (the
// template the official code copies each layer into), and the plan counts it. For
// megatrain, naive and zero3 on Qwen2.5-7B's shape in paper precision: the plan's GPU
// bytes grow by exactly one layer of bf16 weights (256-byte aligned), and the engine,
// built on the sim backend (fake device memory, counted), allocates exactly that much
// more by the end of a step.
#include <stdio.h>
#include <stdlib.h>

#include "backends/sim/sim.h"
#include "engine/engine.h"
#include "model/config.h"
#include "model/layout.h"
#include "planner/planner.h"
#include "test_util.h"

#define CFG "experiments/models/qwen2.5-7b.json"
#define PROFILE "experiments/hardware/gh200-480g.json"

// The engine's options for schedule `name` at 1 x 256 tokens.
static mt_engine_opts opts(const char *name, int copy_bind) {
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.B = 1, o.T = 256, o.sched.offload_checkpoints = 0;
    o.sched.bind = copy_bind ? MT_BIND_COPY : MT_BIND_POINTER;
    if (mt_schedule_find(name, &o.schedule) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        exit(1);
    }
    return o;
}

static size_t plan_gpu_bytes(const mt_config *c, const char *s, int copy_bind) {
    mt_plan_input in = {.prec = MT_PREC_PAPER, .eng = opts(s, copy_bind)};
    mt_plan_memory m;
    if (mt_plan_memory_compute(c, &in, &m) != MT_OK) {
        fprintf(stderr, "plan: %s\n", mt_last_error());
        exit(1);
    }
    const mt_engine_footprint *f = &m.engine;
    CHECK(m.gpu_bytes == f->weights.device + f->grads.device + f->checkpoints.device + f->activations.device,
          "plan parts add up");
    return m.gpu_bytes;
}

// Peak fake device bytes of an engine built and stepped once on the sim backend.
static size_t engine_peak_bytes(const mt_config *c, const char *s, int copy_bind) {
    mt_backend *be = NULL;
    mt_model m;
    mt_engine *e = NULL;
    if (mt_backend_sim_create(PROFILE, MT_BF16, &be) != MT_OK || mt_model_alloc(&m, c, MT_PREC_PAPER, be) != MT_OK) {
        fprintf(stderr, "sim: %s\n", mt_last_error());
        exit(1);
    }
    mt_engine_opts eo = opts(s, copy_bind);
    int32_t *tok = calloc(256, sizeof *tok);
    mt_optim_hparams hp = {3e-4f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    mt_step_stats st;
    if (!tok || mt_engine_create(&m, be, &eo, &e) != MT_OK || mt_engine_step(e, tok, tok, &hp, 3e-4f, 1, &st) != MT_OK ||
        mt_engine_finish(e) != MT_OK) {
        fprintf(stderr, "engine: %s\n", mt_last_error());
        exit(1);
    }
    mt_sim_stats ss;
    mt_sim_stats_get(be, &ss);
    mt_engine_destroy(e);
    mt_model_free(&m);
    mt_backend_destroy(be);
    free(tok);
    return ss.dev_bytes_peak;
}

int main(void) {
    mt_config c;
    if (mt_config_load(CFG, &c) != MT_OK) {
        fprintf(stderr, "%s: %s\n", CFG, mt_last_error());
        return 1;
    }
    mt_unit_layout le, ll, lh;
    mt_layout_build(&c, &le, &ll, &lh);
    size_t layer = (ll.numel * 2 + 255) / 256 * 256; // one layer of bf16 weights, as the engine aligns it
    const char *scheds[] = {"megatrain", "naive", "zero3"};
    for (int i = 0; i < 3; i++) {
        const char *name = scheds[i];
        size_t p0 = plan_gpu_bytes(&c, scheds[i], 0), p1 = plan_gpu_bytes(&c, scheds[i], 1);
        CHECK(p1 - p0 == layer, "%s: plan --bind copy adds %zu bytes, want one layer's %zu", name, p1 - p0, layer);
        size_t e0 = engine_peak_bytes(&c, scheds[i], 0), e1 = engine_peak_bytes(&c, scheds[i], 1);
        CHECK(e1 - e0 == p1 - p0, "%s: the engine's copy bind adds %zu device bytes, the plan %zu", name, e1 - e0,
              p1 - p0);
        printf("%s: copy bind +%zu bytes (plan), +%zu (engine on sim); plan %zu, engine peak %zu\n", name, p1 - p0,
               e1 - e0, p1, e1);
    }
    return mt_test_finish("test_plan_copy_bind");
}
