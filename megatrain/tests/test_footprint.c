// test_footprint.c: the memory plan is what the engine allocates. For every
// schedule and every switch that changes memory (weight buffers, K, copy bind,
// checkpoint offload on/off/auto, gradient accumulation, MLP chunking, slabs,
// the ZeRO-3 knobs, the f32 sum of chunked weight gradients) and every peer, in each precision
// and on model shapes with and without biases, q/k norms and tied embeddings,
// the sim backend's peak device bytes and peak host bytes over creating the
// engine and running two steps equal the plan (mt_engine_footprint_of)
// exactly, and destroying everything gives every byte back.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backends/sim/sim.h"
#include "engine/engine.h"
#include "engine/peer.h"
#include "model/config.h"
#include "model/hardware_profile.h"
#include "test_util.h"

typedef struct {
    const char *schedule;
    int wbuf, K, serial, offload, G, mlp, slabs;
    mt_bind_mode bind;
    long long bucket, live;   // ZeRO-3 prefetch bucket and max live parameters (0: DeepSpeed's)
    int overlap_comm;         // -1: DeepSpeed's
    int pin_memory;           // -1: DeepSpeed's
    mt_grad_sum grad_sum;     // chunked weight gradients: 0 auto (f32 where it fits), f32 or bf16
} variant;

static const variant variants[] = {
    {"megatrain", 2, 1, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"megatrain", 1, 1, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"megatrain", 3, 2, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"megatrain", 2, 3, 1, 0, 2, 8192, 1, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"megatrain", 2, 1, 0, 0, 1, 16, 4, MT_BIND_COPY, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"megatrain", 2, 1, 0, 0, 1, 16, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_BF16},
    {"megatrain", 2, 1, 0, 0, 1, 16, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_F32},
    {"megatrain", 2, 1, 0, 1, 1, 0, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"megatrain", 3, 2, 0, 1, 2, 8192, 2, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"megatrain", 2, 1, 0, -1, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"resident", 2, 1, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"resident", 2, 1, 0, 0, 2, 8192, 4, MT_BIND_COPY, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"naive", 2, 1, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"naive", 2, 2, 0, 1, 2, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"zero3", 2, 1, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"zero3", 2, 1, 0, 0, 2, 8192, 2, MT_BIND_POINTER, 1000, 0, 0, 0, MT_GRAD_SUM_AUTO},
    {"zero3", 2, 1, 0, 0, 1, 8192, 4, MT_BIND_COPY, 1000000000LL, 20000, -1, -1, MT_GRAD_SUM_AUTO},
    // Peers (engine/peer.h): their own fields (f32 parameter staging, copy bind, three weight passes, hooks).
    {"deepspeed-zero3", 2, 1, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"fsdp2-offload", 2, 1, 0, 0, 2, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    {"official", 2, 1, 0, 0, 2, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
};

static const char *models[] = {
    "megatrain/tests/data/tiny5_llama.json",         // untied, no biases
    "megatrain/tests/fixtures/tiny_qwen2/config.json", // q/k/v biases
    "megatrain/tests/fixtures/tiny_qwen3/config.json", // q/k norms
    "megatrain/tests/fixtures/tiny_llama/config.json", // tied embeddings
};

static void check_one(const char *cfg_path, mt_precision p, const variant *v, int B, int T) {
    mt_config c;
    if (mt_config_load(cfg_path, &c) != MT_OK) {
        CHECK(0, "%s: %s", cfg_path, mt_last_error());
        return;
    }
    char profile[4096];
    if (mt_hw_profile_find("h100-128g", profile, sizeof profile) != MT_OK) {
        CHECK(0, "profile: %s", mt_last_error());
        return;
    }
    mt_dtype act = p == MT_PREC_FP32 ? MT_F32 : MT_BF16;
    mt_backend *be = NULL;
    if (mt_backend_sim_create(profile, act, &be) != MT_OK) {
        CHECK(0, "sim: %s", mt_last_error());
        return;
    }
    mt_engine_opts o = {.B = B, .T = T, .grad_accum = v->G, .grad_sum = v->grad_sum, .grad_slabs = v->slabs, .mlp_rows = v->mlp,
                        .sched = {.weight_bufs = v->wbuf, .ckpt_interval = v->K < c.num_layers ? v->K : c.num_layers, .serial_optimizer = v->serial,
                                  .offload_checkpoints = v->offload, .bind = v->bind, .zero3 = mt_zero3_defaults()}};
    if (v->bucket) o.sched.zero3.prefetch_bucket_size = v->bucket;
    if (v->live) o.sched.zero3.max_live_parameters = v->live;
    if (v->overlap_comm >= 0) o.sched.zero3.overlap_comm = v->overlap_comm;
    if (v->pin_memory >= 0) o.sched.zero3.pin_memory = v->pin_memory;
    const mt_peer *peer;
    if (mt_peer_find(v->schedule, &peer) == MT_OK) o.schedule = mt_peer_schedule(peer);
    else CHECK(mt_schedule_find(v->schedule, &o.schedule) == MT_OK, "%s", mt_last_error());
    mt_schedule_desc sd;
    mt_schedule_resolve(o.schedule, &o.sched, &c, &sd);
    mt_device_info info;
    mt_backend_device_info(be, &info);
    mt_engine_footprint fp = mt_engine_footprint_of(&c, p, &o, act, info.mem_free_bytes, mt_backend_caps(be));

    char what[512];
    snprintf(what, sizeof what, "%s %s %s wbuf %d K %d G %d offload %d bind %d mlp %d slabs %d bucket %lld", cfg_path,
             mt_precision_name(p), v->schedule, v->wbuf, v->K, v->G, v->offload, v->bind, v->mlp, v->slabs, v->bucket);
    mt_model m;
    mt_engine *e = NULL;
    mt_status s = mt_model_alloc_ex(&m, &c, p, be, sd.host_pinned);
    CHECK(s == MT_OK, "%s: model: %s", what, mt_last_error());
    if (s == MT_OK) s = mt_engine_create(&m, be, &o, &e);
    CHECK(s == MT_OK, "%s: engine: %s", what, mt_last_error());
    int32_t *tok = calloc((size_t)v->G * B * T, sizeof *tok);
    mt_optim_hparams hp = {3e-4f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    for (int step = 1; step <= 2 && s == MT_OK; step++) {
        mt_step_stats st;
        s = mt_engine_step(e, tok, tok, &hp, 3e-4f, step, &st);
        CHECK(s == MT_OK, "%s: step %d: %s", what, step, mt_last_error());
    }
    if (e) mt_engine_finish(e);
    mt_sim_stats ss;
    mt_sim_stats_get(be, &ss);
    CHECK(ss.dev_bytes_peak == fp.device_bytes, "%s: peak device bytes %zu, plan %zu (weights %zu grads %zu ckpt %zu acts %zu)",
          what, ss.dev_bytes_peak, fp.device_bytes, fp.weights.device, fp.grads.device, fp.checkpoints.device,
          fp.activations.device);
    CHECK(ss.host_bytes_peak == fp.host_bytes, "%s: peak host bytes %zu, plan %zu (state %zu grads %zu ckpt %zu acts %zu)",
          what, ss.host_bytes_peak, fp.host_bytes, fp.state.host, fp.grads.host, fp.checkpoints.host, fp.activations.host);
    mt_engine_destroy(e);
    if (s == MT_OK || m.units) mt_model_free(&m);
    mt_sim_stats_get(be, &ss);
    CHECK(ss.dev_bytes_in_use == 0 && ss.host_bytes_in_use == 0, "%s: %zu device and %zu host bytes still in use", what,
          ss.dev_bytes_in_use, ss.host_bytes_in_use);
    free(tok);
    mt_backend_destroy(be);
}

int main(void) {
    int n = 0;
    // Every schedule in the table is held to its plan: a new entry must join the variants.
    for (int i = 0; i < mt_schedule_count(); i++) {
        int listed = 0;
        for (size_t vi = 0; vi < sizeof variants / sizeof *variants; vi++)
            listed |= !strcmp(variants[vi].schedule, mt_schedule_at(i)->name);
        CHECK(listed, "schedule %s is in the table but not among test_footprint's variants", mt_schedule_at(i)->name);
    }
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++)
        for (int p = 0; p < 3; p++)
            for (size_t vi = 0; vi < sizeof variants / sizeof *variants; vi++, n++)
                check_one(models[mi], (mt_precision)p, &variants[vi], 2, 32);
    // A real shape, where the MLP chunks and the loss head's chunking bite, and offload auto resolves
    // against the device: Qwen2.5-7B at 128k tokens keeps its checkpoints only when told to.
    const variant big[] = {
        {"megatrain", 2, 1, 0, -1, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
        {"megatrain", 3, 4, 0, 1, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
        {"zero3", 2, 1, 0, 0, 1, 8192, 4, MT_BIND_POINTER, 0, 0, -1, -1, MT_GRAD_SUM_AUTO},
    };
    for (size_t vi = 0; vi < sizeof big / sizeof *big; vi++, n++)
        check_one("experiments/models/qwen2.5-7b.json", MT_PREC_PAPER, &big[vi], 1, 131072);
    fprintf(stderr, "%d configurations\n", n);
    return mt_test_finish("test_footprint");
}
