// test_multigpu_nonfinite.c: --gpus N's guarantees that need a look inside, on the cpu
// backend, in every precision. A NaN in one rank's gradient (rank 1's part of layer 0, on
// step 2) is seen by every rank: the global norm is over the reduced gradient, so the step is
// skipped for all, nothing changes (the state after it is the state before it), and the run
// ends bitwise where one rank ends with the NaN in the same micro-batch (the same place in
// the host's order), with the speculative step on (it speculates, then rolls back) and off.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_registry.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "test_util.h"

#define STEPS 3
#define NAN_STEP 2

static mt_host_work real_host;
static void *nan_grad; // layer 0's host gradient
static int nan_armed;  // the step to poison is running
static int speculative_run;

// The contribution that is not the first of layer 0 (G = 1, N = 2: rank 1's; one rank, G = 2:
// micro-batch 1's) gets a NaN in its slab before it is added.
static double poisoned_accumulate(const mt_host_work *h, void *grad, mt_dtype wdt, void *slab, mt_dtype wire, size_t n,
                                  int first, int last) {
    if (speculative_run && grad == nan_grad && last) mt_test_spec_wait(); // the check below needs a speculated unit
    if (nan_armed && grad == nan_grad && !first && slab != grad) {
        if (wire == MT_F32) ((float *)slab)[n / 2] = NAN;
        else ((uint16_t *)slab)[n / 2] = 0x7FC0; // bf16 quiet NaN
    }
    return real_host.accumulate(h, grad, wdt, slab, wire, n, first, last);
}

typedef struct {
    int skipped[STEPS];
    int spec_units;
    unsigned char *state[STEPS]; // every unit's param, m, v, master after each step
    size_t bytes;
} run_out;

// R ranks at global batch 4 x 16 tokens with G micro-batches (R = 1, G = 2: the reference).
static run_out run(mt_precision p, int R, int G, int speculative) {
    run_out r = {0};
    mt_config c;
    CHECK(mt_config_load("megatrain/tests/data/tiny5_llama.json", &c) == MT_OK, "%s", mt_last_error());
    mt_backend *be[2] = {NULL, NULL};
    for (int i = 0; i < R; i++) CHECK(mt_backend_create("cpu", MT_F32, &be[i]) == MT_OK, "%s", mt_last_error());
    mt_model m;
    CHECK(mt_model_alloc(&m, &c, p, be[0]) == MT_OK, "%s", mt_last_error());
    mt_model_init_random(&m, 99);
    real_host = m.host;
    m.host.accumulate = poisoned_accumulate; // the drains and the collective call the model's seam
    mt_test_spec_probe(&m);
    speculative_run = speculative;
    nan_grad = mt_model_layer(&m, 0)->grad;
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.B = 2 * R, o.T = 16, o.grad_accum = G;
    o.sched.speculative = speculative;
    mt_engine *e = NULL;
    CHECK(mt_engine_create_ranks(&m, be, R, &o, &e) == MT_OK, "%s", mt_last_error());
    const int N = 4 * 16; // tokens a step, both ways
    int32_t in[4 * 16], tg[4 * 16];
    int skipped = 0;
    for (int s = 1; s <= STEPS; s++) {
        for (int i = 0; i < N; i++) in[i] = (i * 7 + s * 13) % c.vocab_size, tg[i] = (i * 11 + s * 5 + 1) % c.vocab_size;
        mt_optim_hparams hp = {1e-2f, 0.1f, 0.9f, 0.95f, 1e-8f, 1e6f, skipped}; // clip never: speculation is kept
        mt_step_stats st;
        nan_armed = s == NAN_STEP;
        mt_test_spec_step();
        CHECK(mt_engine_step(e, in, tg, &hp, hp.lr, s, &st) == MT_OK, "%s", mt_last_error());
        CHECK(mt_engine_finish(e) == MT_OK, "finish");
        nan_armed = 0;
        r.skipped[s - 1] = st.skipped;
        r.spec_units += st.spec_units;
        skipped += st.skipped;
        r.state[s - 1] = mt_test_state_snapshot(&m, &r.bytes);
    }
    mt_engine_destroy(e);
    mt_model_free(&m);
    for (int i = 0; i < R; i++) mt_backend_destroy(be[i]);
    return r;
}

static void test_precision(mt_precision p, int speculative) {
    const char *pn = mt_precision_name(p);
    run_out two = run(p, 2, 1, speculative), one = run(p, 1, 2, speculative);
    for (int s = 0; s < STEPS; s++) {
        CHECK(two.skipped[s] == (s + 1 == NAN_STEP), "%s: --gpus 2 step %d skipped=%d", pn, s + 1, two.skipped[s]);
        CHECK(one.skipped[s] == two.skipped[s], "%s: step %d skipped differs from one rank's", pn, s + 1);
        CHECK(!memcmp(two.state[s], one.state[s], two.bytes),
              "%s (speculative %d): the state after step %d differs from one rank's", pn, speculative, s + 1);
    }
    CHECK(!memcmp(two.state[NAN_STEP - 1], two.state[NAN_STEP - 2], two.bytes),
          "%s: the skipped step changed the state", pn);
    if (speculative) CHECK(two.spec_units > 0, "%s: nothing was speculated under --gpus 2", pn);
    for (int s = 0; s < STEPS; s++) free(two.state[s]), free(one.state[s]);
}

int main(void) {
    mt_precision ps[] = {MT_PREC_FP32, MT_PREC_PAPER, MT_PREC_MIXED};
    for (int i = 0; i < 3; i++) {
        test_precision(ps[i], 1);
        test_precision(ps[i], 0);
    }
    return mt_test_finish("test_multigpu_nonfinite");
}
