// host_contention.c: the host memory a weight copy shares with the host's AdamW, measured
// (the sim prices it, megatrain/backends/sim/sim.h "host memory"; what it assumes of it is in
// harness/sweep/cost_sources.py):
//   host_contention/<backend>/paper/<n>   AdamW (paper precision, n params, every core) alone,
//                                         pinned H2D copies alone, then both at once
// Counters: copy_gbps_alone, copy_gbps_beside (the copies that ran wholly inside the AdamW
// passes), copy_share = their ratio (the sim's share: host.shared_gbps / (copy + AdamW GB/s),
// 72% on the H200 profile; its trace measured 74%); adamw_params_per_s_alone, _beside and
// adamw_share (the sim assumes 1: AdamW keeps its rate beside the copies). The copies run
// back to back on their own thread, each waited for, as the engine's weight stream does.
// cpu: a rehearsal (its "copy" is a memcpy).
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend_call.h"
#include "mb.h"
#include "optim/adamw.h"

#define PASSES 5
#define MAX_COPIES 4096

typedef struct {
    mt_backend *be;
    void *h, *d;
    size_t bytes;
    volatile int stop;
    double t0[MAX_COPIES], t1[MAX_COPIES];
    int n;
    const char *fail;
} copier;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *copy_loop(void *v) {
    copier *c = v;
    while (!c->stop && c->n < MAX_COPIES && !c->fail) {
        double t0 = now_s();
        if (mt_backend_copy(c->be, c->d, c->h, c->bytes, MT_COPY_H2D, MT_STREAM_H2D) ||
            mt_backend_stream_sync(c->be, MT_STREAM_H2D)) {
            c->fail = mt_last_error();
            break;
        }
        c->t0[c->n] = t0, c->t1[c->n] = now_s(), c->n++;
    }
    return NULL;
}

// GB/s of the copies wholly inside [a, b] (all of them when b < a); 0 when none.
static double copy_gbps(const copier *c, double a, double b) {
    double bytes = 0, s = 0;
    for (int i = 0; i < c->n; i++)
        if (b < a || (c->t0[i] >= a && c->t1[i] <= b)) bytes += (double)c->bytes, s += c->t1[i] - c->t0[i];
    return s > 0 ? bytes / s / 1e9 : 0;
}

// The median AdamW pass (s) over PASSES.
static double adamw_passes(void *p, const void *g, float *m, float *v, size_t n, mt_adamw_hparams *h, double *a,
                           double *b) {
    double t[PASSES];
    *a = now_s();
    for (int k = 0; k < PASSES; k++) {
        double t0 = now_s();
        h->step++;
        mt_adamw_update(NULL, p, MT_BF16, g, MT_BF16, m, v, n, h, 0.1f);
        t[k] = now_s() - t0;
    }
    *b = now_s();
    return mt_mb_median(t, PASSES);
}

static void bm_contention(mt_mb_state *s, const int64_t *args, const void *user) {
    const char *backend = user, *why = NULL, *fail = NULL;
    mt_backend *be = mt_mb_backend(backend, backend[1] == 'u' ? MT_BF16 : MT_F32, &why);
    if (!be) {
        mt_mb_error(s, why);
        return;
    }
    size_t n = (size_t)args[0];
    copier c = {.be = be, .bytes = (size_t)args[1]};
    void *p = mt_mb_alloc(n * 2), *g = mt_mb_alloc(n * 2);
    float *m = mt_mb_alloc(n * 4), *v = mt_mb_alloc(n * 4);
    if (!p || !g || !m || !v) fail = "out of host memory";
    else if (mt_backend_host_alloc(be, c.bytes, &c.h) || mt_backend_dev_alloc(be, c.bytes, &c.d)) fail = mt_last_error();
    if (!fail) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < (long)n; i++) {
            float x = ((float)(((uint32_t)i * 2654435761u) >> 8) / 16777216.0f - 0.5f) * 0.02f;
            mt_store_f32(p, MT_BF16, (size_t)i, x), mt_store_f32(g, MT_BF16, (size_t)i, x * 0.1f);
            m[i] = 0, v[i] = 0;
        }
        for (size_t i = 0; i < c.bytes; i += 4096) ((char *)c.h)[i] = (char)i; // touched
    }
    mt_adamw_hparams h = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 0};
    double a, b, adamw_alone = 0, adamw_beside = 0, gbps_alone = 0, gbps_beside = 0;
    while (!fail && mt_mb_keep_running(s)) { // one iteration (MT_MB_ONE_ITER): the three phases inside it
        adamw_alone = adamw_passes(p, g, m, v, n, &h, &a, &b);
        pthread_t th;
        for (int both = 0; both < 2 && !fail; both++) {
            c.stop = 0, c.n = 0;
            if (pthread_create(&th, NULL, copy_loop, &c)) {
                fail = "cannot start the copy thread";
                break;
            }
            if (both) adamw_beside = adamw_passes(p, g, m, v, n, &h, &a, &b);
            else {
                struct timespec ts = {0, 200000000};
                nanosleep(&ts, NULL);
            }
            c.stop = 1;
            pthread_join(th, NULL);
            if (c.fail) fail = c.fail;
            else if (both) gbps_beside = copy_gbps(&c, a, b);
            else gbps_alone = copy_gbps(&c, 1, 0);
        }
        if (!fail) mt_mb_set_iteration_time(s, adamw_beside * PASSES);
    }
    if (fail) mt_mb_error(s, fail);
    else if (!gbps_beside) mt_mb_error(s, "no copy ran wholly inside the AdamW passes: n too small for the copy size");
    else {
        mt_mb_counter(s, "copy_gbps_alone", gbps_alone, 0);
        mt_mb_counter(s, "copy_gbps_beside", gbps_beside, 0);
        mt_mb_counter(s, "copy_share", gbps_beside / gbps_alone, 0);
        mt_mb_counter(s, "adamw_params_per_s_alone", (double)n / adamw_alone, 0);
        mt_mb_counter(s, "adamw_params_per_s_beside", (double)n / adamw_beside, 0);
        mt_mb_counter(s, "adamw_share", adamw_alone / adamw_beside, 0);
    }
    if (c.d) mt_backend_dev_free(be, c.d);
    if (c.h) mt_backend_host_free(be, c.h, c.bytes);
    free(p), free(g), free(m), free(v);
}

void mt_mb_register_host_contention(void) {
    const int64_t n = mt_mb_host_n();
    mt_mb_register("host_contention/cpu/paper", bm_contention, "cpu", (int64_t[]){n, 16 << 20}, 2,
                   MT_MB_MANUAL_TIME | MT_MB_ONE_ITER);
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_BF16, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "host_contention/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    // 64 MiB copies: ~1.2 ms each at the H200's 55 GB/s, a dozen inside one AdamW pass of 4x the LLC
    mt_mb_register("host_contention/cuda/paper", bm_contention, "cuda", (int64_t[]){n, 64 << 20}, 2,
                   MT_MB_MANUAL_TIME | MT_MB_ONE_ITER);
}
