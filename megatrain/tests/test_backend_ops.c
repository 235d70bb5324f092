// test_backend_ops.c: every backend in the registry (backend/backend.h) against the one
// op table (op_cases.c), as ggml's test-backend-ops: each case runs through the
// mt_backend_* wrappers on each backend that computes on data, can be created here and
// supports() the case, in each activation type it has, against a double-precision
// reference. Where a backend has several attention implementations each runs the
// attention cases; the environment settings a backend lists as variants (its other
// code paths) rerun the cases of the ops they change. Also: the registry itself and the
// backend plumbing (memory, streams, events) every data backend shares.
// A backend that only prices ops (sim: no data) has its own checks (test_sim).
// Usage: test_backend_ops [--backend NAME] [--case FAMILY] [--perf [--reps N]]
//                         [--no-deliberate-errors] [--list] [--count]
//   --backend: only that backend (exit 77, skipped, where it is not compiled in or has no
//   device); --perf: time each case's main call (median of N, default 10) as JSON lines on
//   stdout, no checks; --no-deliberate-errors: leaves out the checks that provoke API
//   errors on purpose (a 1 PiB allocation), so that compute-sanitizer reports only real
//   ones (ci/gpu_campaign.sh, part G); --list: the table, one case a line; --count: the
//   cases each data backend's supports() takes, without creating one (JSON lines).
// Env: MT_TEST_VERBOSE=1 prints every comparison; MT_REQUIRE_CUDNN=1 fails (instead of
// skipping) when an attention implementation named cudnn cannot be chosen; MT_EMULATED
// (make test-aarch64) leaves out the cases marked heavy.
#define _POSIX_C_SOURCE 200809L // setenv, nanosleep under -std=c11

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend_call.h"
#include "backend/backend_registry.h"
#include "model/hardware_profile.h"
#include "op_cases.h"
#include "test_util.h"

static const char *only_case; // --case
static const oc_row *cur_row;  // the case running (for messages)

// ---------------------------------------------------------------- tensors and checks

static void die_on(mt_status s, const char *what) {
    if (s != MT_OK) {
        fprintf(stderr, "test_backend_ops: %s failed: %s: %s\n", what, mt_status_name(s), mt_last_error());
        exit(1);
    }
}

static void round_to(float *x, size_t n, mt_dtype t) {
    if (t == MT_BF16)
        for (size_t i = 0; i < n; i++) x[i] = mt_bf16_to_f32(mt_f32_to_bf16(x[i]));
}

static unsigned long long seed_ctr = 1;

void oc_sync(oc_ctx *c) { die_on(mt_backend_stream_sync(c->be, MT_STREAM_COMPUTE), "stream_sync"); }

void oc_upload(oc_ctx *c, oc_t *x) {
    round_to(x->h, x->n, x->t);
    size_t bytes = x->n * mt_dtype_size(x->t);
    void *tmp = malloc(bytes ? bytes : 1);
    mt_convert(tmp, x->t, x->h, MT_F32, x->n);
    oc_sync(c); // kernels before may still read the old values
    die_on(mt_backend_copy(c->be, x->d, tmp, bytes, MT_COPY_H2D, MT_STREAM_COMPUTE), "copy h2d");
    oc_sync(c);
    free(tmp);
}

static oc_t alloc_t(oc_ctx *c, size_t n, mt_dtype t) {
    oc_t x = {malloc((n ? n : 1) * sizeof(float)), NULL, n, t};
    if (!x.h) die_on(MT_ERR_MEMORY, "host memory");
    die_on(mt_backend_dev_alloc(c->be, (n ? n : 1) * mt_dtype_size(t), &x.d), "dev_alloc");
    return x;
}

oc_t oc_new(oc_ctx *c, size_t n, mt_dtype t, float lo, float hi) {
    oc_t x = alloc_t(c, n, t);
    mt_test_fill_uniform(x.h, n, seed_ctr++, lo, hi);
    oc_upload(c, &x);
    return x;
}

oc_t oc_rand(oc_ctx *c, size_t n, mt_dtype t) { return oc_new(c, n, t, -1, 1); }

oc_t oc_from(oc_ctx *c, const float *h, size_t n, mt_dtype t) {
    oc_t x = alloc_t(c, n, t);
    memcpy(x.h, h, n * sizeof(float));
    oc_upload(c, &x);
    return x;
}

float *oc_download(oc_ctx *c, const oc_t *x) {
    size_t bytes = x->n * mt_dtype_size(x->t);
    void *tmp = malloc(bytes ? bytes : 1);
    float *out = malloc((x->n ? x->n : 1) * sizeof(float));
    oc_sync(c);
    die_on(mt_backend_copy(c->be, tmp, x->d, bytes, MT_COPY_D2H, MT_STREAM_COMPUTE), "copy d2h");
    oc_sync(c);
    mt_convert(out, MT_F32, tmp, x->t, x->n);
    free(tmp);
    return out;
}

void oc_free(oc_ctx *c, oc_t *x) {
    free(x->h);
    if (x->d) {
        oc_sync(c);
        mt_backend_dev_free(c->be, x->d);
    }
    x->h = NULL, x->d = NULL;
}

void *oc_at(const oc_t *x, size_t elems) { return (char *)x->d + elems * mt_dtype_size(x->t); }

int32_t *oc_ids(oc_ctx *c, const int32_t *h, size_t n) {
    void *d = NULL;
    die_on(mt_backend_dev_alloc(c->be, (n ? n : 1) * 4, &d), "dev_alloc ids");
    die_on(mt_backend_copy(c->be, d, h, n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE), "copy ids");
    oc_sync(c);
    return d;
}

void oc_ids_free(oc_ctx *c, int32_t *d) {
    oc_sync(c);
    mt_backend_dev_free(c->be, d);
}

// A call's status is a precondition, not a check: it counts only when it fails.
int oc_ok(oc_ctx *c, mt_status s, const char *call) {
    if (s != MT_OK) CHECK(s == MT_OK, "%s [%s]: %s: %s\nHINT: the backend refused a case its supports() took", call, c->cfg,
          mt_status_name(s), mt_last_error());
    return s == MT_OK;
}

void oc_close(oc_ctx *c, const char *what, const oc_t *x, const double *ref, double tol) {
    if (c->perf) return;
    float *g = oc_download(c, x);
    double num = 0, den = 0;
    int finite = 1;
    for (size_t i = 0; i < x->n; i++) {
        double d = (double)g[i] - ref[i];
        num += d * d, den += ref[i] * ref[i];
        finite &= isfinite(g[i]) != 0;
    }
    double e = den == 0 ? num : num / den;
    if (c->verbose) fprintf(stderr, "  %-36s %-40s nmse %.3e (tol %.0e)\n", what, c->cfg, e, tol);
    CHECK(finite && e <= tol,
          "%s [%s]: nmse %.3e > %.1e%s\nHINT: MT_TEST_VERBOSE=1 prints every comparison; --case %s runs this family",
          what, c->cfg, e, tol, finite ? "" : " (non-finite values)", cur_row ? cur_row->family : "FAMILY");
    free(g);
}

void oc_same(oc_ctx *c, const char *what, const oc_t *a, const oc_t *b) {
    if (c->perf) return;
    size_t bytes = a->n * mt_dtype_size(a->t);
    int ok = a->n == b->n && a->t == b->t;
    if (ok) {
        char *x = malloc(bytes ? bytes : 1), *y = malloc(bytes ? bytes : 1);
        oc_sync(c);
        die_on(mt_backend_copy(c->be, x, a->d, bytes, MT_COPY_D2H, MT_STREAM_COMPUTE), "copy d2h");
        die_on(mt_backend_copy(c->be, y, b->d, bytes, MT_COPY_D2H, MT_STREAM_COMPUTE), "copy d2h");
        oc_sync(c);
        ok = memcmp(x, y, bytes) == 0;
        free(x), free(y);
    }
    if (c->verbose) fprintf(stderr, "  %-36s %-40s %s\n", what, c->cfg, ok ? "bitwise equal" : "DIFFER");
    CHECK(ok, "%s [%s]: results differ bitwise\nHINT: a reduction order depends on threads or on the path taken", what,
          c->cfg);
}

void oc_expect(oc_ctx *c, int cond, const char *what) {
    if (c->perf) return;
    CHECK(cond, "%s [%s] (%s)", what, c->cfg, mt_last_error());
}

int oc_supports(oc_ctx *c, mt_op op, unsigned flags) {
    mt_op_shape s = c->s;
    s.flags |= flags;
    return mt_backend_supports_shape(c->be, op, &s);
}

double oc_tol(const oc_ctx *c, int rule, double tight, double loose) {
    int bf = rule == OC_BY_ACT ? c->act == MT_BF16 : rule == OC_BY_W ? c->wdt == MT_BF16
                                                                     : c->act == MT_BF16 || c->wdt == MT_BF16;
    return bf ? loose : tight;
}

double oc_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void oc_perf_report(oc_ctx *c, const char *what, const double *ms, int n, double flops) {
    double s[64];
    memcpy(s, ms, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_d);
    double med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    const mt_op_shape *d = &c->s;
    printf("{\"backend\":\"%s\",\"act\":\"%s\",\"w\":\"%s\",\"impl\":\"%s\",\"variant\":\"%s\",\"case\":\"%s\","
           "\"op\":\"%s\",\"shape\":[%d,%d,%d,%d,%d,%d,%d,%d,%d],\"reps\":%d,\"ms_median\":%.6f,\"ms_min\":%.6f",
           c->entry->name, mt_dtype_name(c->act), mt_dtype_name(c->wdt), mt_attn_kernel_name(c->impl, c->act == MT_BF16),
           c->variant ? c->variant : "", cur_row ? cur_row->family : "", what, d->N, d->C, d->OC, d->V, d->B, d->T,
           d->NH, d->NKV, d->HD, n, med, s[0]);
    if (flops > 0 && med > 0) printf(",\"tflops\":%.6g", flops / (med * 1e-3) / 1e12);
    printf("}\n");
}

// ---------------------------------------------------------------- the table on one backend

typedef struct {
    int cases, skipped, checks;
} tally;

static int op_in(unsigned long long ops, mt_op op) { return (ops >> op) & 1ull; }

// Runs the rows whose op is in `ops` (all: ~0) on c->be.
static tally run_rows(oc_ctx *c, unsigned long long ops) {
    tally t = {0, 0, mt_test_checks};
    const char *impl = c->impl == MT_ATTN_AUTO ? "" : mt_attn_kernel_name(c->impl, c->act == MT_BF16);
    for (int i = 0; i < mt_op_case_count; i++) {
        const oc_row *r = &mt_op_cases[i];
        if (!op_in(ops, r->op) || (only_case && strcmp(only_case, r->family))) continue;
        if ((r->flags & OC_HEAVY) && c->emulated) continue;
        if ((r->flags & OC_ACT_F32) && c->act != MT_F32) continue;
        for (int wi = 0; wi < 2; wi++) {
            mt_dtype wdt = wi ? MT_BF16 : MT_F32;
            if (r->wdts ? !(r->wdts & (1u << wi)) : wi) continue;
            c->wdt = wdt;
            c->s = r->s;
            c->s.act = c->act, c->s.wdt = wdt, c->s.flags = 0;
            snprintf(c->cfg, sizeof c->cfg, "%s act=%s%s%s%s%s%s%s %s", c->entry->name, mt_dtype_name(c->act),
                     r->wdts ? " w=" : "", r->wdts ? mt_dtype_name(wdt) : "", *impl ? " " : "", impl,
                     c->variant ? " " : "", c->variant ? c->variant : "", r->family);
            mt_backend *keep = c->be, *fresh = NULL;
            if (r->flags & OC_FRESH) {
                mt_backend_args a = {c->act, NULL, 0};
                die_on(c->entry->create(&a, &fresh), "create a fresh backend");
                c->be = fresh;
            }
            if (!mt_backend_supports_shape(c->be, r->op, &c->s)) {
                t.skipped++;
                if (c->verbose) fprintf(stderr, "  (not supported) %s\n", c->cfg);
            } else {
                cur_row = r;
                r->run(c, r);
                t.cases++;
            }
            if (fresh) mt_backend_destroy(fresh);
            c->be = keep;
        }
    }
    t.checks = mt_test_checks - t.checks;
    return t;
}

static void say_tally(const oc_ctx *c, const char *what, tally t) {
    fprintf(stderr, "test_backend_ops: %s act=%s %s: %d cases, %d checks, %d not supported\n", c->entry->name,
            mt_dtype_name(c->act), what, t.cases, t.checks, t.skipped);
}

// ---------------------------------------------------------------- plumbing every data backend shares

static void plumbing(oc_ctx *c) {
    mt_backend *be = c->be;
    snprintf(c->cfg, sizeof c->cfg, "%s act=%s plumbing", c->entry->name, mt_dtype_name(c->act));
    int async = mt_backend_has(be, MT_CAP_ASYNC);
    mt_device_info info;
    oc_ok(c, mt_backend_device_info(be, &info), "device_info");
    fprintf(stderr, "test_backend_ops: %s: %s, %.1f GiB (%.1f free), NUMA node %d\n", c->entry->name, info.name,
            info.mem_total_bytes / 1073741824.0, info.mem_free_bytes / 1073741824.0, info.numa_node);
    CHECK(info.mem_total_bytes > 0 && info.mem_free_bytes > 0 && info.mem_free_bytes <= info.mem_total_bytes,
          "[%s] device_info: total %zu free %zu", c->cfg, info.mem_total_bytes, info.mem_free_bytes);

    // pinned host memory and device memory; a round trip across streams ordered by events
    const size_t n = 3u << 20;
    void *hp = NULL, *dp = NULL;
    die_on(mt_backend_host_alloc(be, n, &hp), "host_alloc");
    die_on(mt_backend_dev_alloc(be, n, &dp), "dev_alloc");
    CHECK(((uintptr_t)hp & 4095u) == 0, "[%s] host_alloc is page-aligned", c->cfg);
    CHECK(((uintptr_t)dp & 63u) == 0, "[%s] dev_alloc is 64-byte aligned", c->cfg);
    mt_event *e0, *e1, *e2, *never;
    die_on(mt_backend_event_create(be, &e0), "event_create");
    die_on(mt_backend_event_create(be, &e1), "event_create");
    die_on(mt_backend_event_create(be, &e2), "event_create");
    die_on(mt_backend_event_create(be, &never), "event_create");
    for (int s = 0; s < MT_NUM_STREAMS; s++) // the first step waits on events nothing recorded yet
        CHECK(mt_backend_stream_wait(be, (mt_stream_id)s, never) == MT_OK, "[%s] wait on a never-recorded event (stream %d)",
              c->cfg, s);
    CHECK(mt_backend_event_sync(be, never) == MT_OK, "[%s] event_sync on a never-recorded event returns at once", c->cfg);
    float ms = -1;
    if (c->deliberate_errors)
        CHECK(mt_backend_event_elapsed_ms(be, e0, e1, &ms) != MT_OK, "[%s] elapsed on unrecorded events succeeded", c->cfg);
    memset(hp, 0x5a, n);
    die_on(mt_backend_event_record(be, e0, MT_STREAM_H2D), "record");
    die_on(mt_backend_copy(be, dp, hp, n, MT_COPY_H2D, MT_STREAM_H2D), "h2d");
    die_on(mt_backend_event_record(be, e1, MT_STREAM_H2D), "record");
    die_on(mt_backend_stream_wait(be, MT_STREAM_D2H, e1), "stream_wait");
    die_on(mt_backend_event_sync(be, e1), "event_sync"); // the h2d copy has read hp
    memset(hp, 0, 1u << 20);
    die_on(mt_backend_copy(be, hp, dp, 1u << 20, MT_COPY_D2H, MT_STREAM_D2H), "d2h");
    die_on(mt_backend_event_record(be, e2, MT_STREAM_D2H), "record");
    die_on(mt_backend_stream_sync(be, MT_STREAM_D2H), "stream_sync");
    die_on(mt_backend_event_elapsed_ms(be, e0, e1, &ms), "elapsed");
    CHECK(ms >= 0 && isfinite(ms), "[%s] event timing %.3f ms", c->cfg, ms);
    CHECK(((unsigned char *)hp)[12345] == 0x5a, "[%s] h2d then d2h round trip across streams", c->cfg);
    die_on(mt_backend_event_elapsed_ms(be, e0, e2, &ms), "elapsed");
    CHECK(isfinite(ms), "[%s] elapsed between events of different streams", c->cfg);
    // memset_zero of a range, on the compute stream
    die_on(mt_backend_memset_zero(be, dp, 5000, MT_STREAM_COMPUTE), "memset_zero");
    die_on(mt_backend_stream_sync(be, MT_STREAM_COMPUTE), "sync");
    die_on(mt_backend_copy(be, hp, dp, 8192, MT_COPY_D2H, MT_STREAM_COMPUTE), "d2h");
    die_on(mt_backend_stream_sync(be, MT_STREAM_COMPUTE), "sync");
    CHECK(((unsigned char *)hp)[4999] == 0 && ((unsigned char *)hp)[5000] == 0x5a, "[%s] memset_zero's range", c->cfg);
    // a synchronous backend's events time the host: a 20 ms sleep between two records
    if (!async) {
        die_on(mt_backend_event_record(be, e0, MT_STREAM_COMPUTE), "record");
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        die_on(mt_backend_event_record(be, e1, MT_STREAM_D2H), "record");
        die_on(mt_backend_event_elapsed_ms(be, e0, e1, &ms), "elapsed");
        CHECK(ms >= 19.0f && ms < 2000.0f, "[%s] event_elapsed_ms %.3f for a 20 ms sleep", c->cfg, ms);
    }
    mt_backend_event_destroy(be, e0), mt_backend_event_destroy(be, e1), mt_backend_event_destroy(be, e2);
    mt_backend_event_destroy(be, never);
    mt_backend_dev_free(be, dp);
    mt_backend_host_free(be, hp, n);

    // memset and a device copy on every stream, odd length
    size_t m = 1001;
    oc_t x = oc_rand(c, m, c->act), y = oc_rand(c, m, c->act);
    double *r = calloc(m, sizeof(double));
    for (int s = 0; s < MT_NUM_STREAMS; s++) {
        char what[48];
        die_on(mt_backend_memset_zero(be, x.d, m * mt_dtype_size(c->act), (mt_stream_id)s), "memset_zero");
        die_on(mt_backend_stream_sync(be, (mt_stream_id)s), "stream_sync");
        for (size_t i = 0; i < m; i++) r[i] = 0;
        snprintf(what, sizeof what, "memset_zero on stream %d", s);
        oc_close(c, what, &x, r, 0.0);
        die_on(mt_backend_copy(be, x.d, y.d, m * mt_dtype_size(c->act), MT_COPY_D2D, (mt_stream_id)s), "copy d2d");
        die_on(mt_backend_stream_sync(be, (mt_stream_id)s), "stream_sync");
        for (size_t i = 0; i < m; i++) r[i] = y.h[i];
        snprintf(what, sizeof what, "copy d2d on stream %d", s);
        oc_close(c, what, &x, r, 0.0);
    }
    free(r);
    oc_free(c, &x), oc_free(c, &y);

#ifndef __SANITIZE_ADDRESS__ // ASan aborts on impossible sizes instead of returning NULL
    if (c->deliberate_errors) { // an allocation error on purpose: left out under compute-sanitizer
        void *huge = NULL;
        size_t big = mt_backend_has(be, MT_CAP_DEVICE_MEMORY) ? (size_t)1 << 50 : (size_t)1 << 62;
        mt_status s = mt_backend_dev_alloc(be, big, &huge);
        CHECK(s == MT_ERR_MEMORY && !huge, "[%s] dev_alloc of %zu bytes fails cleanly: %s (%s)", c->cfg, big,
              mt_status_name(s), mt_last_error());
    }
#endif
    // a shape it refuses: supports() says so, and the call says MT_ERR_SHAPE
    mt_op_shape bad = {.act = c->act, .wdt = MT_F32, .B = 1, .T = 4, .NH = 3, .NKV = 2, .HD = 16};
    CHECK(!mt_backend_supports_shape(be, MT_OP_ATTENTION_FWD, &bad) &&
              mt_backend_attention_fwd(be, NULL, NULL, NULL, 1, 4, 3, 2, 16) == MT_ERR_SHAPE,
          "[%s] NH %% NKV != 0: refused", c->cfg);
    bad.NH = 2, bad.HD = 15;
    CHECK(!mt_backend_supports_shape(be, MT_OP_ROPE_FWD, &bad) &&
              mt_backend_rope_fwd(be, NULL, NULL, NULL, NULL, 1, 4, 2, 2, 15) == MT_ERR_SHAPE,
          "[%s] odd HD: refused by rope", c->cfg);
}

// Backward kernels give the same bits with 1 and with 3 host threads, where the backend
// says its results are bitwise reproducible (MT_SHAPE_BITWISE).
static void thread_independence(oc_ctx *c) {
    mt_op_shape s = {.act = c->act, .wdt = MT_F32, .flags = MT_SHAPE_BITWISE};
    if (!mt_backend_supports_shape(c->be, MT_OP_ATTENTION_BWD, &(mt_op_shape){.act = c->act, .NH = 4, .NKV = 2,
                                                                               .HD = 16, .flags = MT_SHAPE_BITWISE}) ||
        !mt_backend_supports_shape(c->be, MT_OP_RMSNORM_BWD, &s) || !mt_backend_supports_shape(c->be, MT_OP_MATMUL_BWD, &s) ||
        !mt_backend_supports_shape(c->be, MT_OP_EMBEDDING_BWD, &s))
        return;
    snprintf(c->cfg, sizeof c->cfg, "%s act=%s threads", c->entry->name, mt_dtype_name(c->act));
    c->wdt = MT_F32;
    int B = 1, T = 300, NH = 4, NKV = 2, HD = 16, R = 700, D = 96, V = 40;
    size_t nqkv = (size_t)B * T * (NH + 2 * NKV) * HD, no = (size_t)B * T * NH * HD;
    oc_t qkv = oc_new(c, nqkv, c->act, -1.5f, 1.5f), dout = oc_rand(c, no, c->act), out = oc_rand(c, no, c->act);
    oc_t lse = oc_rand(c, (size_t)NH * T, MT_F32), x = oc_rand(c, (size_t)R * D, c->act), w = oc_new(c, D, MT_F32, 0.5f, 1.5f);
    oc_t g = oc_rand(c, (size_t)R * D, c->act), rstd = oc_rand(c, R, MT_F32), y = oc_rand(c, (size_t)R * D, c->act);
    oc_t d[2], dx[2], dw[2], db[2], m[2], e[2];
    int32_t ids[700];
    for (int i = 0; i < R; i++) ids[i] = (i * 13) % V;
    int32_t *idd = oc_ids(c, ids, R);
    oc_ok(c, mt_backend_rmsnorm_fwd(c->be, y.d, rstd.d, x.d, w.d, MT_F32, R, D, 1e-5f), "rmsnorm_fwd");
    int saved = omp_get_max_threads();
    for (int pass = 0; pass < 2; pass++) {
        d[pass] = oc_rand(c, nqkv, c->act), dx[pass] = oc_rand(c, (size_t)R * D, c->act), dw[pass] = oc_rand(c, D, MT_F32);
        db[pass] = oc_new(c, D, MT_F32, 0, 0), m[pass] = oc_new(c, (size_t)D * D, MT_F32, 0, 0);
        e[pass] = oc_new(c, (size_t)V * D, MT_F32, 0, 0);
        omp_set_num_threads(pass == 0 ? 1 : 3);
        oc_ok(c, mt_backend_attention_fwd(c->be, out.d, lse.d, qkv.d, B, T, NH, NKV, HD), "attention_fwd");
        oc_ok(c, mt_backend_attention_bwd(c->be, d[pass].d, dout.d, qkv.d, out.d, lse.d, B, T, NH, NKV, HD), "attention_bwd");
        oc_ok(c, mt_backend_rmsnorm_bwd(c->be, dx[pass].d, dw[pass].d, g.d, x.d, w.d, rstd.d, MT_F32, R, D), "rmsnorm_bwd");
        oc_ok(c, mt_backend_matmul_bwd(c->be, NULL, m[pass].d, db[pass].d, g.d, x.d, w.d, MT_F32, R, D, D, 0), "matmul_bwd");
        oc_ok(c, mt_backend_embedding_bwd(c->be, e[pass].d, MT_F32, idd, g.d, R, D), "embedding_bwd");
        oc_sync(c);
    }
    omp_set_num_threads(saved);
    oc_same(c, "attention_bwd 1 vs 3 threads", &d[0], &d[1]);
    oc_same(c, "rmsnorm_bwd dinp 1 vs 3 threads", &dx[0], &dx[1]);
    oc_same(c, "rmsnorm_bwd dw 1 vs 3 threads", &dw[0], &dw[1]);
    oc_same(c, "matmul_bwd dbias 1 vs 3 threads", &db[0], &db[1]);
    oc_same(c, "embedding_bwd 1 vs 3 threads", &e[0], &e[1]);
    for (int p = 0; p < 2; p++) oc_free(c, &d[p]), oc_free(c, &dx[p]), oc_free(c, &dw[p]), oc_free(c, &db[p]), oc_free(c, &m[p]), oc_free(c, &e[p]);
    oc_ids_free(c, idd);
    oc_free(c, &qkv), oc_free(c, &dout), oc_free(c, &out), oc_free(c, &lse), oc_free(c, &x), oc_free(c, &w);
    oc_free(c, &g), oc_free(c, &rstd), oc_free(c, &y);
}

// ---------------------------------------------------------------- the registry

static void test_registry(void) {
    const char *names[16];
    int n = mt_backend_list(names, 16);
    CHECK(n == mt_backend_count() && n >= 2, "mt_backend_list: %d names, %d rows", n, mt_backend_count());
    int has_cpu = 0;
    for (int i = 0; i < mt_backend_count(); i++) {
        const mt_backend_entry *e = mt_backend_at(i);
        CHECK(e && e->name && e->summary && e->create && !strcmp(names[i], e->name), "row %d is whole", i);
        CHECK(mt_backend_find(e->name) == e && mt_backend_caps_of(e->name) == e->caps, "%s: found by name", e->name);
        has_cpu |= !strcmp(e->name, "cpu");
        if (e->available && e->available() != 1) continue;
        // what the row says is what the backend it creates says
        char path[4096];
        mt_backend_args a = {MT_F32, NULL, 0};
        if (e->caps & MT_CAP_VIRTUAL_TIME) {
            die_on(mt_hw_profile_find("h100-128g", path, sizeof path), "profile h100-128g");
            a.profile_path = path;
        }
        mt_backend *be = NULL;
        mt_status s = e->create(&a, &be);
        CHECK(s == MT_OK, "%s: create: %s", e->name, mt_last_error());
        if (s != MT_OK) continue;
        CHECK(be->ops->caps == e->caps && !strcmp(be->ops->name, e->name) && be->ops->supports == e->supports,
              "%s: the row's caps/name/supports are its ops table's", e->name);
        mt_backend_destroy(be);
        if (!(e->caps & MT_CAP_BF16)) { // f32 only: says so before and at creation
            a.act_dtype = MT_BF16;
            mt_op_shape sh = {.act = MT_BF16, .wdt = MT_F32, .N = 4, .C = 4};
            CHECK(e->supports && !e->supports(NULL, MT_OP_ADD, &sh), "%s: supports() refuses bf16 activations", e->name);
            CHECK(e->create(&a, &be) == MT_ERR_UNSUPPORTED && !be, "%s accepted bf16 activations", e->name);
        }
    }
    CHECK(has_cpu, "the registry has cpu");
    mt_backend *b = NULL;
    CHECK(mt_backend_find("nope") == NULL && mt_backend_create("nope", MT_F32, &b) == MT_ERR_ARG && !b,
          "unknown backend: MT_ERR_ARG");
    CHECK(strstr(mt_last_error(), "nope") && strstr(mt_last_error(), "cpu"), "the message names it and lists the rows: %s",
          mt_last_error());
    CHECK(mt_backend_create("sim", MT_F32, &b) != MT_OK && strstr(mt_last_error(), "--hardware"),
          "a virtual-time backend without a profile: an error naming --hardware, got: %s", mt_last_error());
    const mt_backend_entry *a = mt_backend_find("auto");
    CHECK(a && (a->caps & MT_CAP_TENSOR_DATA) && mt_backend_caps_of("auto") == a->caps, "auto picks a data backend");
    die_on(mt_backend_create("auto", MT_F32, &b), "create auto");
    CHECK(b && !strcmp(mt_backend_name(b), a->name), "auto created %s", a->name);
    mt_backend_destroy(b);
#ifndef MT_HAVE_CUDA
    CHECK(!strcmp(a->name, "cpu"), "auto without CUDA is cpu");
    CHECK(mt_backend_create("cuda", MT_F32, &b) == MT_ERR_UNSUPPORTED && strstr(mt_last_error(), "without CUDA"),
          "cuda compiled out: says so (%s)", mt_last_error());
#endif
}

// ---------------------------------------------------------------- main

// --count: per data backend in the registry (a device is not needed), the cases its
// supports() takes at its default attention, by activation type; variants and other
// attention implementations add to these where they run.
static int count_cases(void) {
    for (int bi = 0; bi < mt_backend_count(); bi++) {
        const mt_backend_entry *e = mt_backend_at(bi);
        if (!(e->caps & MT_CAP_TENSOR_DATA)) continue;
        for (int ai = 0; ai < 2; ai++) {
            mt_dtype act = ai ? MT_BF16 : MT_F32;
            if (act == MT_BF16 && !(e->caps & MT_CAP_BF16)) continue;
            int yes = 0, no = 0;
            for (int i = 0; i < mt_op_case_count; i++) {
                const oc_row *r = &mt_op_cases[i];
                if ((r->flags & OC_ACT_F32) && act != MT_F32) continue;
                for (int wi = 0; wi < 2; wi++) {
                    if (r->wdts ? !(r->wdts & (1u << wi)) : wi) continue;
                    mt_op_shape sh = r->s;
                    sh.act = act, sh.wdt = wi ? MT_BF16 : MT_F32, sh.flags = 0;
                    if (!e->supports || e->supports(NULL, r->op, &sh)) yes++;
                    else no++;
                }
            }
            printf("{\"backend\":\"%s\",\"act\":\"%s\",\"rows\":%d,\"cases\":%d,\"not_supported\":%d}\n", e->name,
                   mt_dtype_name(act), mt_op_case_count, yes, no);
        }
    }
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: test_backend_ops [--backend NAME] [--case FAMILY] [--perf [--reps N]] "
                    "[--no-deliberate-errors] [--list] [--count]\n");
}

int main(int argc, char **argv) {
    const char *only = NULL;
    oc_ctx base = {.reps = 10, .deliberate_errors = 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) only_case = argv[++i];
        else if (!strcmp(argv[i], "--perf")) base.perf = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) base.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-deliberate-errors")) base.deliberate_errors = 0;
        else if (!strcmp(argv[i], "--count")) return count_cases();
        else if (!strcmp(argv[i], "--list")) {
            for (int k = 0; k < mt_op_case_count; k++) {
                const oc_row *r = &mt_op_cases[k];
                const mt_op_shape *s = &r->s;
                printf("%-18s %-16s N=%d C=%d OC=%d V=%d B=%d T=%d NH=%d NKV=%d HD=%d  %s\n", r->family,
                       mt_op_name(r->op), s->N, s->C, s->OC, s->V, s->B, s->T, s->NH, s->NKV, s->HD, r->why);
            }
            return 0;
        } else {
            fprintf(stderr, "test_backend_ops: unknown argument '%s'\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (base.reps < 1 || base.reps > 64) base.reps = 10;
    base.verbose = getenv("MT_TEST_VERBOSE") != NULL;
    base.emulated = getenv("MT_EMULATED") != NULL;
    if (base.emulated) fprintf(stderr, "test_backend_ops: heavy cases left out under emulation (MT_EMULATED)\n");
    const char *req = getenv("MT_REQUIRE_CUDNN");
    int require_cudnn = req && req[0] == '1';
    if (only && mt_backend_check_name(only) != MT_OK) {
        fprintf(stderr, "test_backend_ops: skipped (%s)\n", mt_last_error());
        return 77;
    }
    if (!only && !base.perf) test_registry();
    int ran = 0;
    for (int bi = 0; bi < mt_backend_count(); bi++) {
        const mt_backend_entry *e = mt_backend_at(bi);
        if (only && strcmp(only, e->name) && !(!strcmp(only, "auto") && mt_backend_find("auto") == e)) continue;
        if (!(e->caps & MT_CAP_TENSOR_DATA)) {
            fprintf(stderr, "test_backend_ops: %s: no tensor data (it prices ops; its own checks: test_sim)\n", e->name);
            continue;
        }
        if (e->available && e->available() != 1) {
            fprintf(stderr, "test_backend_ops: %s: skipped (no device here)\n", e->name);
            continue;
        }
        ran++;
        for (int ai = 0; ai < 2; ai++) {
            oc_ctx c = base;
            c.entry = e;
            c.act = ai ? MT_BF16 : MT_F32;
            if (c.act == MT_BF16 && !(e->caps & MT_CAP_BF16)) continue;
            mt_backend_args a = {c.act, NULL, 0};
            die_on(e->create(&a, &c.be), e->name);
            int choices = mt_backend_supports(c.be, MT_OP_SET_ATTENTION);
            c.impl = MT_ATTN_AUTO;
            if (choices) { // its own kernels first; each other implementation for the attention cases below
                die_on(mt_backend_set_attention(c.be, MT_ATTN_NATIVE), "--attention native");
                c.impl = MT_ATTN_NATIVE;
            }
            if (!c.perf) plumbing(&c), thread_independence(&c);
            say_tally(&c, c.impl == MT_ATTN_AUTO ? "(its one attention)" : "native", run_rows(&c, ~0ull));
            const char *impls[8];
            int ni = choices ? mt_attention_list(impls, 8) : 0;
            for (int k = 0; k < ni; k++) {
                mt_attn_impl impl;
                if (mt_attn_impl_parse(impls[k], &impl) != MT_OK || impl == MT_ATTN_NATIVE) continue;
                mt_status s = mt_backend_set_attention(c.be, impl);
                int required = require_cudnn && impl == MT_ATTN_CUDNN && c.act == MT_BF16; // cuDNN's is bf16
                if (s != MT_OK) {
                    fprintf(stderr, "test_backend_ops: %s act=%s attention %s %s: %s\n", e->name, mt_dtype_name(c.act),
                            impls[k], required ? "FAILED" : "skipped", mt_last_error());
                    CHECK(!required, "MT_REQUIRE_CUDNN=1 but %s's cudnn attention is unavailable", e->name);
                    continue;
                }
                c.impl = impl;
                say_tally(&c, impls[k], run_rows(&c, (1ull << MT_OP_ATTENTION_FWD) | (1ull << MT_OP_ATTENTION_BWD)));
                die_on(mt_backend_set_attention(c.be, MT_ATTN_NATIVE), "--attention native");
                c.impl = MT_ATTN_NATIVE;
            }
            mt_backend_destroy(c.be);
            // the backend's other code paths, each selected by an environment setting at creation
            for (int v = 0; v < e->n_variants; v++) {
                const mt_backend_variant *var = &e->variants[v];
                if (var->act_bf16_only && c.act != MT_BF16) continue;
                char name[64], *eq;
                snprintf(name, sizeof name, "%s", var->env);
                if (!(eq = strchr(name, '='))) continue;
                *eq = 0;
                setenv(name, eq + 1, 1); // read at creation or when the attention is chosen
                mt_status s = e->create(&a, &c.be);
                if (s != MT_OK) unsetenv(name);
                die_on(s, var->env);
                c.variant = var->env;
                c.impl = MT_ATTN_AUTO;
                if (var->attention != MT_ATTN_AUTO) {
                    s = mt_backend_set_attention(c.be, (mt_attn_impl)var->attention);
                    if (s != MT_OK) {
                        int required = require_cudnn && var->attention == MT_ATTN_CUDNN;
                        fprintf(stderr, "test_backend_ops: %s %s: %s (%s)\n", e->name, var->env,
                                required ? "FAILED" : "skipped", mt_last_error());
                        CHECK(!required, "MT_REQUIRE_CUDNN=1 but %s with %s cannot choose cudnn", e->name, var->env);
                        unsetenv(name);
                        mt_backend_destroy(c.be);
                        c.variant = NULL;
                        continue;
                    }
                    c.impl = (mt_attn_impl)var->attention;
                } else if (choices) {
                    die_on(mt_backend_set_attention(c.be, MT_ATTN_NATIVE), "--attention native");
                    c.impl = MT_ATTN_NATIVE;
                }
                unsetenv(name);
                say_tally(&c, var->env, run_rows(&c, var->ops));
                mt_backend_destroy(c.be);
                c.variant = NULL;
            }
        }
    }
    if (only && !ran) {
        fprintf(stderr, "test_backend_ops: skipped (--backend %s: no device here)\n", only);
        return 77;
    }
    if (base.perf) return mt_test_failures ? 1 : 0;
    return mt_test_finish("test_backend_ops");
}
