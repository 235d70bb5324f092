// test_backend_call.c: the thin layer over the backend table. What a backend
// supports is asked, not assumed; a missing entry is refused by name; a failing
// call names the backend and the op; copies are counted, and the engine's link
// bytes are exactly the copies it traces (every copy but token ids and losses).
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backend/backend_registry.h"
#include "backends/sim/sim.h"
#include "engine/engine.h"
#include "model/hardware_profile.h"
#include "test_util.h"

static mt_backend *sim(mt_dtype act) {
    char path[4096];
    mt_backend *be = NULL;
    if (mt_hw_profile_find("h100-128g", path, sizeof path) != MT_OK || mt_backend_sim_create(path, act, &be) != MT_OK) {
        fprintf(stderr, "sim: %s\n", mt_last_error());
        exit(1);
    }
    return be;
}

static void test_supports(void) {
    mt_backend *cpu = NULL, *vs = sim(MT_BF16);
    CHECK(mt_backend_create("cpu", MT_F32, &cpu) == MT_OK, "%s", mt_last_error());
    for (int op = 0; op < MT_OP_HOST_WORK_MS; op++) {
        CHECK(mt_backend_supports(cpu, (mt_op)op), "cpu supports %s", mt_op_name((mt_op)op));
        CHECK(mt_backend_supports(vs, (mt_op)op), "sim supports %s", mt_op_name((mt_op)op));
    }
    CHECK(!mt_backend_supports(cpu, MT_OP_HOST_WORK_MS) && mt_backend_supports(vs, MT_OP_HOST_WORK_MS),
          "only the virtual-time backend prices host work");
    CHECK(!mt_backend_supports(cpu, MT_OP_TRACE_WRITE) && mt_backend_supports(vs, MT_OP_TRACE_WRITE),
          "only the sim records its own timeline");
    // A missing entry: refused, naming backend and op.
    mt_status s = mt_backend_trace_write(cpu, "/nonexistent/x.json");
    CHECK(s == MT_ERR_UNSUPPORTED && strstr(mt_last_error(), "cpu") && strstr(mt_last_error(), "trace_write"),
          "missing entry: %s", mt_last_error());
    // A failing call: the backend's message, with the backend and the op in front.
    mt_event *a, *b;
    CHECK(mt_backend_event_create(vs, &a) == MT_OK && mt_backend_event_create(vs, &b) == MT_OK, "events");
    float ms;
    s = mt_backend_event_elapsed_ms(vs, a, b, &ms);
    CHECK(s == MT_ERR_ARG && !strncmp(mt_last_error(), "sim event_elapsed_ms: ", 22) &&
              strstr(mt_last_error(), "never recorded"),
          "failing op named: %s", mt_last_error());
    mt_backend_event_destroy(vs, a);
    mt_backend_event_destroy(vs, b);
    // Copies are counted by kind.
    float x[64] = {0}, y[64];
    double h2d = mt_backend_copied_bytes(cpu, MT_COPY_H2D), d2d = mt_backend_copied_bytes(cpu, MT_COPY_D2D);
    CHECK(mt_backend_copy(cpu, y, x, sizeof x, MT_COPY_H2D, MT_STREAM_H2D) == MT_OK, "copy");
    CHECK(mt_backend_copy(cpu, y, x, 100, MT_COPY_D2D, MT_STREAM_COMPUTE) == MT_OK, "copy");
    CHECK(mt_backend_copied_bytes(cpu, MT_COPY_H2D) - h2d == sizeof x &&
              mt_backend_copied_bytes(cpu, MT_COPY_D2D) - d2d == 100,
          "copied bytes counted by kind");
    mt_backend_destroy(cpu);
    mt_backend_destroy(vs);
}

// The engine's h2d/d2h bytes (its traced link copies) against everything the
// backend copied: the difference is the token ids and targets in (2 x G x N x 4
// bytes) and the losses out (G x N x 4), nothing else.
static void test_link_bytes(const char *schedule, int K, int offload, int G) {
    mt_config c;
    CHECK(mt_config_load("megatrain/tests/data/tiny5_llama.json", &c) == MT_OK, "%s", mt_last_error());
    mt_backend *be = sim(MT_BF16);
    mt_model m;
    mt_engine *e = NULL;
    const int B = 2, T = 32, N = B * T;
    mt_engine_opts o = {.B = B, .T = T, .grad_accum = G, .grad_slabs = 4,
                        .sched = {.weight_bufs = 2, .ckpt_interval = K, .offload_checkpoints = offload,
                                  .zero3 = mt_zero3_defaults()}};
    CHECK(mt_schedule_find(schedule, &o.schedule) == MT_OK, "%s", mt_last_error());
    CHECK(mt_model_alloc(&m, &c, MT_PREC_PAPER, be) == MT_OK, "%s", mt_last_error());
    CHECK(mt_engine_create(&m, be, &o, &e) == MT_OK, "%s", mt_last_error());
    int32_t *tok = calloc((size_t)G * N, sizeof *tok);
    mt_optim_hparams hp = {3e-4f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    for (int step = 1; step <= 2; step++) {
        double in0 = mt_backend_copied_bytes(be, MT_COPY_H2D), out0 = mt_backend_copied_bytes(be, MT_COPY_D2H);
        mt_step_stats st;
        CHECK(mt_engine_step(e, tok, tok, &hp, 3e-4f, step, &st) == MT_OK, "%s", mt_last_error());
        double in = mt_backend_copied_bytes(be, MT_COPY_H2D) - in0, out = mt_backend_copied_bytes(be, MT_COPY_D2H) - out0;
        CHECK(in == st.h2d_bytes + 2.0 * G * N * 4, "%s K=%d offload=%d G=%d step %d: H2D %g = link %g + tokens",
              schedule, K, offload, G, step, in, st.h2d_bytes);
        CHECK(out == st.d2h_bytes + (double)G * N * 4, "%s K=%d offload=%d G=%d step %d: D2H %g = link %g + losses",
              schedule, K, offload, G, step, out, st.d2h_bytes);
        CHECK(st.h2d_bytes > 0 && st.d2h_bytes > 0, "link bytes counted");
    }
    mt_engine_finish(e);
    mt_engine_destroy(e);
    mt_model_free(&m);
    free(tok);
    mt_backend_destroy(be);
}

int main(void) {
    test_supports();
    test_link_bytes("megatrain", 1, 0, 1);
    test_link_bytes("megatrain", 1, 1, 2); // checkpoints out and back in count as link traffic
    test_link_bytes("zero3", 1, 0, 2);     // submodule pieces and f32 gradients
    test_link_bytes("naive", 2, 0, 1);
    test_link_bytes("resident", 1, 0, 2);
    return mt_test_finish("test_backend_call");
}
