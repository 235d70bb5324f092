// copy.c: host<->device copies through the backend (mt_backend_copy + events), after
// nvbandwidth: CUDA-event timing of each sample, median of the samples, the data
// checked afterwards ("wrong" = mismatched 32-bit words, as nccl-tests' #wrong).
//   copy/<backend>/<pinned|pageable>/<h2d|d2h|bidir>/<bytes>
// Counters (decimal GB/s): gbps (median), gbps_min, gbps_max over the samples;
// bidir runs H2D and D2H at once on their two streams and reports gbps for the
// sum of both directions plus h2d_gbps and d2h_gbps for each (its duplex factor
// is h2d_gbps / the h2d run's gbps). The reported iteration time is the median.
// Unlike nvbandwidth there is no spin kernel holding the stream while copies are
// queued (the backend interface has none): enqueue latency (a few us) stays in
// the 1 MiB figures. On the cpu backend "device" memory is host memory and a copy
// is memcpy; its "pinned" is the backend's page-aligned host_alloc.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend_call.h"
#include "mb.h"

enum { DIR_H2D = 0, DIR_D2H = 1, DIR_BIDIR = 2 };

typedef struct {
    const char *backend;
    int pinned;
    int dir;
} copy_cfg;

typedef struct {
    mt_backend *be;
    size_t bytes;
    int pinned;
    void *h_src, *h_dst, *d_a, *d_b; // h_src -> d_a (H2D); d_b -> h_dst (D2H)
    mt_event *e0, *e1, *eh, *ed;
} copy_ctx;

static void fill(void *p, size_t bytes, uint32_t seed) {
    uint32_t *w = p;
    size_t n = bytes / 4;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) w[i] = (uint32_t)i * 2654435761u ^ seed;
}

static long count_wrong(const void *got, size_t bytes, uint32_t seed) {
    const uint32_t *w = got;
    long wrong = 0;
    size_t n = bytes / 4;
#pragma omp parallel for schedule(static) reduction(+ : wrong)
    for (size_t i = 0; i < n; i++) wrong += w[i] != ((uint32_t)i * 2654435761u ^ seed);
    return wrong;
}

static const char *host_alloc(copy_ctx *c, size_t bytes, void **out) {
    if (c->pinned) return mt_backend_host_alloc(c->be, bytes, out) ? mt_last_error() : NULL;
    *out = mt_mb_alloc(bytes); // pageable, touched
    return *out ? NULL : "out of host memory";
}

static void host_release(copy_ctx *c, void *p) {
    if (!p) return;
    if (c->pinned) mt_backend_host_free(c->be, p, c->bytes);
    else free(p);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One timed sample. Fills ms[0] total, ms[1] H2D part, ms[2] D2H part (bidir).
static const char *sample(copy_ctx *c, int dir, float ms[3]) {
    mt_backend *be = c->be;
    double t0 = now_s();
    if (dir != DIR_BIDIR) {
        mt_stream_id s = dir == DIR_H2D ? MT_STREAM_H2D : MT_STREAM_D2H;
        if (mt_backend_event_record(be, c->e0, s)) return mt_last_error();
        if (dir == DIR_H2D ? mt_backend_copy(be, c->d_a, c->h_src, c->bytes, MT_COPY_H2D, s)
                           : mt_backend_copy(be, c->h_dst, c->d_b, c->bytes, MT_COPY_D2H, s))
            return mt_last_error();
        if (mt_backend_event_record(be, c->e1, s) || mt_backend_event_sync(be, c->e1)) return mt_last_error();
        double wall_ms = (now_s() - t0) * 1e3;
        // The cpu backend may time events by the wall clock or not at all.
        if (mt_backend_event_elapsed_ms(be, c->e0, c->e1, &ms[0]) || ms[0] <= 0) ms[0] = (float)wall_ms;
        ms[1] = ms[2] = ms[0];
        return NULL;
    }
    if (mt_backend_event_record(be, c->e0, MT_STREAM_COMPUTE) || mt_backend_stream_wait(be, MT_STREAM_H2D, c->e0) ||
        mt_backend_stream_wait(be, MT_STREAM_D2H, c->e0) ||
        mt_backend_copy(be, c->d_a, c->h_src, c->bytes, MT_COPY_H2D, MT_STREAM_H2D) ||
        mt_backend_copy(be, c->h_dst, c->d_b, c->bytes, MT_COPY_D2H, MT_STREAM_D2H) ||
        mt_backend_event_record(be, c->eh, MT_STREAM_H2D) || mt_backend_event_record(be, c->ed, MT_STREAM_D2H) ||
        mt_backend_stream_wait(be, MT_STREAM_COMPUTE, c->eh) || mt_backend_stream_wait(be, MT_STREAM_COMPUTE, c->ed) ||
        mt_backend_event_record(be, c->e1, MT_STREAM_COMPUTE) || mt_backend_event_sync(be, c->e1))
        return mt_last_error();
    double wall_ms = (now_s() - t0) * 1e3;
    if (mt_backend_event_elapsed_ms(be, c->e0, c->e1, &ms[0]) || ms[0] <= 0) ms[0] = (float)wall_ms;
    if (mt_backend_event_elapsed_ms(be, c->e0, c->eh, &ms[1]) || ms[1] <= 0) ms[1] = ms[0];
    if (mt_backend_event_elapsed_ms(be, c->e0, c->ed, &ms[2]) || ms[2] <= 0) ms[2] = ms[0];
    return NULL;
}

static void bm_copy(mt_mb_state *s, const int64_t *args, const void *user) {
    const copy_cfg *cfg = user;
    const char *fail = NULL;
    copy_ctx c = {0};
    c.bytes = (size_t)args[0];
    c.pinned = cfg->pinned;
    c.be = mt_mb_backend(cfg->backend, MT_F32, &fail);
    if (!c.be) {
        mt_mb_error(s, fail);
        return;
    }
    const int h2d = cfg->dir != DIR_D2H, d2h = cfg->dir != DIR_H2D;
    const uint32_t seed_in = 0x1234567u, seed_out = 0x89abcdeu;
    if (h2d && !fail) fail = host_alloc(&c, c.bytes, &c.h_src);
    if (d2h && !fail) fail = host_alloc(&c, c.bytes, &c.h_dst);
    if (!fail && h2d && mt_backend_dev_alloc(c.be, c.bytes, &c.d_a)) fail = mt_last_error();
    if (!fail && d2h && mt_backend_dev_alloc(c.be, c.bytes, &c.d_b)) fail = mt_last_error();
    if (!fail && (mt_backend_event_create(c.be, &c.e0) || mt_backend_event_create(c.be, &c.e1) || mt_backend_event_create(c.be, &c.eh) ||
                  mt_backend_event_create(c.be, &c.ed)))
        fail = mt_last_error();
    if (!fail && d2h) { // the device source holds a known pattern, staged through h_dst
        fill(c.h_dst, c.bytes, seed_out);
        if (mt_backend_copy(c.be, c.d_b, c.h_dst, c.bytes, MT_COPY_H2D, MT_STREAM_H2D) || mt_backend_stream_sync(c.be, MT_STREAM_H2D))
            fail = mt_last_error();
        memset(c.h_dst, 0, c.bytes);
    }
    if (!fail && h2d) fill(c.h_src, c.bytes, seed_in);

    enum { MAX_SAMPLES = 11 };
    const int n_samples = c.bytes >= (256u << 20) ? 5 : MAX_SAMPLES;
    double tot[MAX_SAMPLES], th[MAX_SAMPLES], td[MAX_SAMPLES];
    float ms[3];
    if (!fail) fail = sample(&c, cfg->dir, ms); // warm-up: first-use costs (mapping, TLB) stay out
    while (!fail && mt_mb_keep_running(s)) {
        for (int k = 0; k < n_samples && !fail; k++) {
            fail = sample(&c, cfg->dir, ms);
            tot[k] = ms[0] * 1e-3, th[k] = ms[1] * 1e-3, td[k] = ms[2] * 1e-3;
        }
        if (!fail) mt_mb_set_iteration_time(s, mt_mb_median(tot, n_samples)); // tot now sorted
    }
    long wrong = 0;
    if (!fail && h2d) { // read the device copy back and compare with what was sent
        void *back = mt_mb_alloc(c.bytes);
        if (!back) fail = "out of host memory";
        else if (mt_backend_copy(c.be, back, c.d_a, c.bytes, MT_COPY_D2H, MT_STREAM_D2H) ||
                 mt_backend_stream_sync(c.be, MT_STREAM_D2H))
            fail = mt_last_error();
        else wrong += count_wrong(back, c.bytes, seed_in);
        free(back);
    }
    if (!fail && d2h) wrong += count_wrong(c.h_dst, c.bytes, seed_out);
    if (fail) mt_mb_error(s, fail);
    else {
        double moved = (double)c.bytes * (h2d + d2h);
        mt_mb_set_bytes_processed(s, moved); // one iteration whose time is the median sample
        mt_mb_counter(s, "gbps", moved / mt_mb_median(tot, n_samples) / 1e9, 0);
        mt_mb_counter(s, "gbps_min", moved / tot[n_samples - 1] / 1e9, 0);
        mt_mb_counter(s, "gbps_max", moved / tot[0] / 1e9, 0);
        if (cfg->dir == DIR_BIDIR) {
            mt_mb_counter(s, "h2d_gbps", (double)c.bytes / mt_mb_median(th, n_samples) / 1e9, 0);
            mt_mb_counter(s, "d2h_gbps", (double)c.bytes / mt_mb_median(td, n_samples) / 1e9, 0);
        }
        mt_mb_counter(s, "samples", n_samples, 0);
        mt_mb_counter(s, "wrong", (double)wrong, 0);
        if (wrong) mt_mb_error(s, "copy: data differs after the copy");
    }
    mt_event *evs[4] = {c.e0, c.e1, c.eh, c.ed};
    for (int i = 0; i < 4; i++)
        if (evs[i]) mt_backend_event_destroy(c.be, evs[i]);
    if (c.d_a) mt_backend_dev_free(c.be, c.d_a);
    if (c.d_b) mt_backend_dev_free(c.be, c.d_b);
    host_release(&c, c.h_src);
    host_release(&c, c.h_dst);
}

static const char *dir_names[3] = {"h2d", "d2h", "bidir"};

static void register_backend(const char *backend, int with_pageable) {
    static copy_cfg cfgs[2][2][3]; // [backend cpu/cuda][pinned][dir]
    int bi = strcmp(backend, "cpu") != 0;
    for (int pinned = 1; pinned >= (with_pageable ? 0 : 1); pinned--)
        for (int d = 0; d < 3; d++) {
            copy_cfg *cfg = &cfgs[bi][pinned][d];
            *cfg = (copy_cfg){backend, pinned, d};
            char name[64];
            snprintf(name, sizeof name, "copy/%s/%s/%s", backend, pinned ? "pinned" : "pageable", dir_names[d]);
            for (int64_t mib = 1; mib <= 1024; mib *= 4) {
                int64_t bytes = mib << 20;
                mt_mb_register(name, bm_copy, cfg, &bytes, 1, MT_MB_MANUAL_TIME | MT_MB_ONE_ITER);
            }
        }
}

void mt_mb_register_copy(void) {
    register_backend("cpu", 0); // pinned and pageable are the same thing there
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_F32, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "copy/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    register_backend("cuda", 1);
}
