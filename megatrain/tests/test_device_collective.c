// test_device_collective.c: a backend's device collective (backend/device_collective.h) is
// found through its own registry row, not by name, and the engine lands the parts it leaves
// (engine/collective_device.c). A cpu backend whose row offers a fake in-place reduce-scatter
// (rank r keeps the sum of chunk r, the last rank the remainder too) trains --gpus 2 to the
// parameters of one rank taking both halves of the batch as micro-batches, in fp32.
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backend/backend_impl.h"
#include "backend/backend_registry.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "test_util.h"

enum { R = 2 };
static pthread_barrier_t bar;
static void *grads[R];
static int reduces, ready_recorded;

static mt_status fake_reduce(mt_device_collective *c, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                             mt_stream_id s, mt_event *ready, size_t *off, size_t *count) {
    if (t != MT_F32) return mt_fail(MT_ERR_ARG, "fake collective: f32 only");
    size_t chunk = n / R, lo = (size_t)rank * chunk, hi = rank == R - 1 ? n : lo + chunk;
    grads[rank] = dev_grad;
    pthread_barrier_wait(&bar); // every rank's gradient is complete (cpu: synchronous)
    float sum[64];
    for (size_t i = lo; i < hi; i += 64) { // summed in rank order, written after every rank has read
        size_t k = hi - i < 64 ? hi - i : 64;
        for (size_t j = 0; j < k; j++) {
            float acc = 0;
            for (int q = 0; q < R; q++) acc += ((float *)grads[q])[i + j];
            sum[j] = acc;
        }
        memcpy((float *)dev_grad + i, sum, k * sizeof *sum);
    }
    pthread_barrier_wait(&bar);
    if (rank == 0) __atomic_add_fetch(&reduces, 1, __ATOMIC_RELAXED);
    *off = lo;
    *count = hi - lo;
    __atomic_add_fetch(&ready_recorded, 1, __ATOMIC_RELAXED);
    return mt_backend_event_record(be, ready, s);
}
static void fake_destroy(mt_device_collective *c) { free(c); }
static mt_status fake_create(mt_backend **bes, int n_ranks, mt_device_collective **out) {
    mt_device_collective *c = calloc(1, sizeof *c);
    if (!c) return mt_fail(MT_ERR_MEMORY, "fake collective");
    *c = (mt_device_collective){.name = "fake", .n_ranks = n_ranks, .reduce = fake_reduce, .destroy = fake_destroy};
    *out = c;
    return MT_OK;
}

static mt_backend_entry fake_row;
static mt_backend_ops fake_ops;

// Trains 2 steps; returns the parameters of every unit, concatenated.
static float *train(const mt_config *c, int n_ranks, size_t *n_out) {
    mt_backend *be[R];
    for (int i = 0; i < n_ranks; i++) {
        CHECK(mt_backend_create("cpu", MT_F32, &be[i]) == MT_OK, "%s", mt_last_error());
        if (n_ranks > 1) be[i]->ops = &fake_ops; // the same name ("cpu"), another row
    }
    mt_model m;
    CHECK(mt_model_alloc(&m, c, MT_PREC_FP32, be[0]) == MT_OK, "%s", mt_last_error());
    mt_model_init_random(&m, 7);
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.B = 4 / (R / n_ranks), o.T = 16, o.grad_accum = R / n_ranks; // one rank: both halves as micro-batches
    mt_engine *e = NULL;
    CHECK(mt_engine_create_ranks(&m, be, n_ranks, &o, &e) == MT_OK, "%s", mt_last_error());
    int32_t in[4 * 16], tg[4 * 16];
    for (int i = 0; i < 4 * 16; i++) in[i] = (i * 7) % c->vocab_size, tg[i] = (i * 11 + 1) % c->vocab_size;
    mt_optim_hparams hp = {1e-3f, 0.1f, 0.9f, 0.95f, 1e-8f, 0.0f, 0};
    for (int step = 1; step <= 2; step++) {
        mt_step_stats st;
        CHECK(mt_engine_step(e, in, tg, &hp, hp.lr, step, &st) == MT_OK, "step %d: %s", step, mt_last_error());
    }
    CHECK(mt_engine_finish(e) == MT_OK, "finish: %s", mt_last_error());
    size_t n = 0;
    for (int u = 0; u < m.n_units; u++) n += m.units[u].lay->numel;
    float *p = malloc(n * sizeof *p);
    CHECK(p != NULL, "host memory");
    for (int u = 0, k = 0; u < m.n_units; k += (int)m.units[u].lay->numel, u++)
        memcpy(p + k, m.units[u].param, m.units[u].lay->numel * sizeof *p);
    mt_engine_destroy(e);
    mt_model_free(&m);
    for (int i = 0; i < n_ranks; i++) mt_backend_destroy(be[i]);
    *n_out = n;
    return p;
}

int main(void) {
    mt_config c;
    CHECK(mt_config_load("megatrain/tests/data/tiny5_llama.json", &c) == MT_OK, "%s", mt_last_error());
    pthread_barrier_init(&bar, NULL, R);
    mt_backend *probe;
    CHECK(mt_backend_create("cpu", MT_F32, &probe) == MT_OK, "%s", mt_last_error());
    fake_ops = *probe->ops;
    fake_row = *fake_ops.entry;
    fake_row.collective = fake_create;
    fake_ops.entry = &fake_row;
    mt_backend_destroy(probe);

    size_t n1, n2;
    float *one = train(&c, 1, &n1);
    float *two = train(&c, R, &n2);
    CHECK(reduces > 0, "the row's collective reduced (found through the backend's own row): %d reduces", reduces);
    CHECK(ready_recorded == R * reduces, "every reduce recorded its ready event (%d of %d)", ready_recorded,
          R * reduces);
    CHECK(n1 == n2, "same model");
    double worst = 0;
    for (size_t i = 0; i < n1; i++) {
        double d = fabs((double)one[i] - two[i]) / (fabs((double)one[i]) + 1e-6);
        if (d > worst) worst = d;
    }
    CHECK(worst < 1e-4, "--gpus 2 through the device collective trains to one rank's parameters (worst rel %.3g)",
          worst);
    free(one);
    free(two);
    pthread_barrier_destroy(&bar);
    return mt_test_finish("test_device_collective");
}
