// test_sim_collective.c: the sim shows --gpus N's reduction overlapped with the backward.
// Two sim ranks train through the sim's device collective (its registry row's, priced on a
// stream of its own: backends/sim/sim_collective.c); the same collective made to hold the
// compute stream until each reduction ends (the reduction on the compute stream, as the
// engine ran NCCL before) gives a longer step. Virtual time: no wall clock is read.
#include <stdio.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backend/backend_impl.h"
#include "backend/backend_registry.h"
#include "backends/sim/sim.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "test_util.h"

enum { R = 2 };
static mt_backend_ops serial_ops;
static mt_backend_entry serial_row;
static mt_status (*own_create)(mt_backend **, int, mt_device_collective **);
static mt_status (*own_reduce)(mt_device_collective *, int, mt_backend *, void *, mt_dtype, size_t, mt_stream_id,
                               mt_event *, size_t *, size_t *);

static mt_status serial_reduce(mt_device_collective *c, int rank, mt_backend *be, void *g, mt_dtype t, size_t n,
                               mt_stream_id s, mt_event *ready, size_t *off, size_t *count) {
    MT_TRY(own_reduce(c, rank, be, g, t, n, s, ready, off, count));
    return mt_backend_stream_wait(be, s, ready); // the stream that made the gradient waits for its reduction
}
static mt_status serial_create(mt_backend **bes, int n, mt_device_collective **out) {
    MT_TRY(own_create(bes, n, out));
    own_reduce = (*out)->reduce;
    (*out)->reduce = serial_reduce;
    return MT_OK;
}

// The steady step: step 3's virtual milliseconds; *coll_ms: rank 0's reductions in it.
static double step_ms(const mt_config *c, int serial, double *coll_ms) {
    mt_backend *be[R];
    for (int i = 0; i < R; i++) {
        CHECK(mt_backend_sim_create("experiments/hardware/h200-128g.json", MT_BF16, &be[i]) == MT_OK, "%s",
              mt_last_error());
        if (serial) be[i]->ops = &serial_ops;
    }
    mt_model m;
    CHECK(mt_model_alloc(&m, c, MT_PREC_PAPER, be[0]) == MT_OK, "%s", mt_last_error());
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.B = 4, o.T = 512, o.grad_accum = 1;
    mt_engine *e = NULL;
    CHECK(mt_engine_create_ranks(&m, be, R, &o, &e) == MT_OK, "%s", mt_last_error());
    static int32_t tok[4 * 512];
    mt_optim_hparams hp = {1e-3f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    double ms = 0;
    mt_sim_stats a = {0}, b = {0}; // sim.h's inspection reads the sim's own ops table only
    for (int step = 1; step <= 3; step++) {
        mt_step_stats st;
        if (!serial) CHECK(mt_sim_stats_get(be[0], &a) == MT_OK, "stats: %s", mt_last_error());
        double t0 = mt_engine_now_ms(e);
        CHECK(mt_engine_step(e, tok, tok, &hp, hp.lr, step, &st) == MT_OK, "step %d: %s", step, mt_last_error());
        ms = mt_engine_now_ms(e) - t0;
        if (!serial) CHECK(mt_sim_stats_get(be[0], &b) == MT_OK, "stats: %s", mt_last_error());
    }
    *coll_ms = b.collective_busy_ms - a.collective_busy_ms;
    CHECK(mt_engine_finish(e) == MT_OK, "finish: %s", mt_last_error());
    mt_engine_destroy(e);
    mt_model_free(&m);
    for (int i = 0; i < R; i++) mt_backend_destroy(be[i]);
    return ms;
}

int main(void) {
    // Qwen2-shaped, wide enough that a unit's reduction over PCIe (no multi.* in the profile) is
    // a share of the step worth hiding.
    const char *cfg = mt_test_write_tmp("qwen2_1k.json",
                                        "{\"model_type\":\"qwen2\",\"vocab_size\":152064,\"hidden_size\":1024,"
                                        "\"intermediate_size\":2816,\"num_hidden_layers\":8,\"num_attention_heads\":16,"
                                        "\"num_key_value_heads\":2,\"max_position_embeddings\":32768,"
                                        "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":false}");
    mt_config c;
    CHECK(mt_config_load(cfg, &c) == MT_OK, "%s", mt_last_error());
    mt_backend *probe;
    CHECK(mt_backend_sim_create("experiments/hardware/h200-128g.json", MT_BF16, &probe) == MT_OK, "%s",
          mt_last_error());
    serial_ops = *probe->ops;
    serial_row = *serial_ops.entry;
    own_create = serial_row.collective;
    CHECK(own_create != NULL, "the sim's registry row offers a device collective");
    serial_row.collective = serial_create;
    serial_ops.entry = &serial_row;
    mt_backend_destroy(probe);
    if (!own_create) return mt_test_finish("test_sim_collective");

    double coll_own, coll_serial;
    double own = step_ms(&c, 0, &coll_own), serial = step_ms(&c, 1, &coll_serial);
    (void)coll_serial;
    printf("step: %.4f ms with the reduction on its own stream, %.4f ms on the compute stream; reductions %.4f ms\n",
           own, serial, coll_own);
    CHECK(coll_own > 0, "the reductions were priced (%.4f ms)", coll_own);
    CHECK(own < serial, "on its own stream the reduction overlaps the backward: %.4f < %.4f ms", own, serial);
    return mt_test_finish("test_sim_collective");
}
