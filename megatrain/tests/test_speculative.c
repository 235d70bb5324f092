// test_speculative.c: the speculative optimizer step against the plain one, on
// the cpu backend, in every precision. The state after N steps (parameters, m,
// v and the f32 master) must be the same bit for bit: with clipping never
// triggering (no rollback), clipping on every step and on some steps
// (rollbacks: the out-of-place result dropped), and a NaN gradient injected in one
// step (the non-finite policy: the step is skipped, in both paths, and the
// state is exactly the state before it).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_registry.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "test_util.h"

#define STEPS 5

// The NaN injection: at the seam the drain calls, the unit's accumulated
// gradient gets a NaN on the chosen step's last micro-batch.
static mt_host_work real_host;
static void *nan_grad;      // the unit's host gradient
static mt_dtype nan_dt;
static int nan_armed;       // the step to poison is running

static int patient; // this run must speculate: layer 0's drain waits for it (test_util.h)

static double poisoned_accumulate(const mt_host_work *h, void *grad, mt_dtype wdt, void *slab, mt_dtype wire, size_t n,
                                  int first, int last) {
    double sq = real_host.accumulate(h, grad, wdt, slab, wire, n, first, last);
    if (patient && grad == nan_grad && last) mt_test_spec_wait();
    if (!nan_armed || grad != nan_grad || !last) return sq;
    if (nan_dt == MT_F32) ((float *)grad)[n / 2] = NAN;
    else ((uint16_t *)grad)[n / 2] = 0x7FC0; // bf16 quiet NaN
    return NAN;                              // what the sum of squares of that gradient is
}

typedef struct {
    double norm[STEPS];
    int spec_units, rollbacks, clipped, skipped[STEPS];
    unsigned char *state; // every unit's param, m, v, master
    size_t state_bytes;
} run_out;

// `steps` steps of tiny5 in precision p; clip (0 = off); a NaN in layer 0's
// gradient on step nan_step (0 = never).
static run_out run(mt_precision p, int speculative, float clip, int nan_step, int steps, int G) {
    run_out r = {0};
    mt_config c;
    CHECK(mt_config_load("megatrain/tests/data/tiny5_llama.json", &c) == MT_OK, "%s", mt_last_error());
    mt_backend *be = NULL;
    CHECK(mt_backend_create("cpu", MT_F32, &be) == MT_OK, "%s", mt_last_error());
    mt_model m;
    CHECK(mt_model_alloc(&m, &c, p, be) == MT_OK, "%s", mt_last_error());
    mt_model_init_random(&m, 1234);
    real_host = m.host;
    m.host.accumulate = poisoned_accumulate; // the drain reads the model's seam through a pointer
    mt_test_spec_probe(&m);
    nan_grad = mt_model_layer(&m, 0)->grad;
    nan_dt = m.wdt;
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.B = 2, o.T = 16, o.grad_accum = G;
    o.sched.speculative = speculative;
    mt_engine *e = NULL;
    CHECK(mt_engine_create(&m, be, &o, &e) == MT_OK, "%s", mt_last_error());
    const int N = o.B * o.T * G;
    int32_t *in = malloc(sizeof *in * N), *tg = malloc(sizeof *tg * N);
    int skipped = 0;
    for (int s = 1; s <= steps; s++) {
        for (int i = 0; i < N; i++) in[i] = (i * 7 + s * 13) % c.vocab_size, tg[i] = (i * 11 + s * 5 + 1) % c.vocab_size;
        mt_optim_hparams hp = {1e-2f, 0.1f, 0.9f, 0.95f, 1e-8f, clip, skipped};
        mt_step_stats st;
        nan_armed = s == nan_step;
        mt_test_spec_step();
        CHECK(mt_engine_step(e, in, tg, &hp, hp.lr, s, &st) == MT_OK, "%s", mt_last_error());
        nan_armed = 0; // the step's drains are over when it returns
        r.norm[s - 1] = st.grad_norm;
        r.skipped[s - 1] = st.skipped;
        r.spec_units += st.spec_units;
        r.rollbacks += st.rollbacks;
        // A speculated unit rolls back exactly when the step clips or is skipped.
        int redo = st.clip_factor < 1.0 || st.skipped;
        CHECK(st.rollbacks == (redo ? st.spec_units : 0), "step %d (clip %g, skipped %d): %d rollbacks of %d speculated units",
              s, st.clip_factor, st.skipped, st.rollbacks, st.spec_units);
        r.clipped += st.clip_factor < 1.0;
        if (!speculative) CHECK(st.spec_units == 0, "no speculation when it is off (%d)", st.spec_units);
        skipped += st.skipped;
    }
    CHECK(mt_engine_finish(e) == MT_OK, "finish");
    r.state = mt_test_state_snapshot(&m, &r.state_bytes);
    mt_engine_destroy(e);
    mt_model_free(&m);
    mt_backend_destroy(be);
    free(in);
    free(tg);
    return r;
}

static void same_state(const run_out *a, const run_out *b, const char *what) {
    CHECK(a->state_bytes == b->state_bytes && !memcmp(a->state, b->state, a->state_bytes),
          "%s: the state differs from the non-speculative step's", what);
}

static void test_precision(mt_precision p) {
    const char *pn = mt_precision_name(p);
    char what[128];
    // Large clip: never clips, so nothing rolls back.
    run_out plain = run(p, 0, 1e6f, 0, STEPS, 1);
    patient = 1; // the check that something was speculated must not ride on the race
    run_out spec = run(p, 1, 1e6f, 0, STEPS, 1);
    patient = 0;
    snprintf(what, sizeof what, "%s, clip never triggers", pn);
    same_state(&spec, &plain, what);
    CHECK(spec.rollbacks == 0, "%s: %d rollbacks without clipping", what, spec.rollbacks);
    CHECK(spec.spec_units > 0, "%s: no unit was updated under the backward", what);

    // Clip below every norm of the unclipped run: the first steps clip, speculated units roll back.
    double lo = plain.norm[0], mid;
    for (int s = 0; s < STEPS; s++) lo = plain.norm[s] < lo ? plain.norm[s] : lo;
    double sorted[STEPS];
    memcpy(sorted, plain.norm, sizeof sorted);
    for (int i = 0; i < STEPS; i++)
        for (int j = i + 1; j < STEPS; j++)
            if (sorted[j] < sorted[i]) mid = sorted[i], sorted[i] = sorted[j], sorted[j] = mid;
    mid = sorted[STEPS / 2];
    float clip_all = (float)(lo * 0.98);
    run_out pa = run(p, 0, clip_all, 0, STEPS, 1);
    patient = 1; // the check below needs a speculated unit on a clipped step
    run_out sa = run(p, 1, clip_all, 0, STEPS, 1);
    patient = 0;
    snprintf(what, sizeof what, "%s, clips", pn);
    same_state(&sa, &pa, what);
    CHECK(sa.clipped >= 1 && sa.rollbacks > 0, "%s: %d steps clipped, %d rollbacks: nothing rolled back was tested", what,
          sa.clipped, sa.rollbacks);

    // Clip far below: every step clips, and the running norm passes the clip early,
    // so speculation stops where it would only have to roll back.
    run_out pl = run(p, 0, (float)(lo * 0.3), 0, STEPS, 1), sl = run(p, 1, (float)(lo * 0.3), 0, STEPS, 1);
    snprintf(what, sizeof what, "%s, clips every step", pn);
    same_state(&sl, &pl, what);
    CHECK(sl.clipped == STEPS, "%s: %d of %d steps clipped", what, sl.clipped, STEPS);

    // Clip at the median norm: some steps clip.
    run_out pm = run(p, 0, (float)mid, 0, STEPS, 2), sm = run(p, 1, (float)mid, 0, STEPS, 2);
    snprintf(what, sizeof what, "%s, clips some steps, G = 2", pn);
    same_state(&sm, &pm, what);

    // A NaN gradient on step 3: skipped in both paths, with the same state after.
    run_out pn3 = run(p, 0, 1.0f, 3, STEPS, 1), sn3 = run(p, 1, 1.0f, 3, STEPS, 1);
    snprintf(what, sizeof what, "%s, NaN gradient on step 3", pn);
    same_state(&sn3, &pn3, what);
    CHECK(pn3.skipped[2] && sn3.skipped[2] && !pn3.skipped[1] && !sn3.skipped[3], "%s: step 3 alone is skipped", what);
    CHECK(!isfinite(pn3.norm[2]), "%s: the norm reports the NaN", what);
    // The skip leaves the state as it was: 3 steps with a NaN on the last = 2 steps.
    run_out two = run(p, 1, 1.0f, 0, 2, 1), skip_last = run(p, 1, 1.0f, 3, 3, 1);
    snprintf(what, sizeof what, "%s, a skipped step changes nothing", pn);
    same_state(&skip_last, &two, what);
    CHECK(skip_last.rollbacks == skip_last.spec_units, "%s: a skipped step rolls back what it speculated", what);

    run_out *all[] = {&plain, &spec, &pa, &sa, &pl, &sl, &pm, &sm, &pn3, &sn3, &two, &skip_last};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]->state);
}

// Where speculation does not apply it is refused, naming the option.
static void test_refused(void) {
    mt_config c;
    CHECK(mt_config_load("megatrain/tests/data/tiny5_llama.json", &c) == MT_OK, "%s", mt_last_error());
    const char *names[] = {"resident", "zero3", "naive"};
    for (int i = 0; i < 3; i++) {
        mt_engine_opts o;
        mt_engine_opts_defaults(&o);
        CHECK(mt_schedule_find(names[i], &o.schedule) == MT_OK, "%s", names[i]);
        CHECK(mt_engine_opts_validate(&o, &c) == MT_OK, "%s: auto is accepted: %s", names[i], mt_last_error());
        o.sched.speculative = 1;
        CHECK(mt_engine_opts_validate(&o, &c) != MT_OK && strstr(mt_last_error(), "--speculative-step"),
              "%s: refused: %s", names[i], mt_last_error());
    }
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.sched.speculative = 1;
    o.sched.serial_optimizer = 1;
    CHECK(mt_engine_opts_validate(&o, &c) != MT_OK && strstr(mt_last_error(), "--serial-optimizer"),
          "with the serial optimizer: %s", mt_last_error());
}

int main(void) {
    test_refused();
    test_precision(MT_PREC_FP32);
    test_precision(MT_PREC_PAPER);
    test_precision(MT_PREC_MIXED);
    return mt_test_finish("test_speculative");
}
