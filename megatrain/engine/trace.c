// trace.c: spans in one growable array under a mutex (host spans arrive from
// the drain and optimizer threads); device spans hold two pooled events each.
#include "engine/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/out_file.h"

typedef struct {
    char name[24];
    int layer, lane, stream, step, device;
    int ev0, ev1;   // pool indices (device spans)
    double t0, t1;  // ms on the engine clock, once resolved
} span;

struct mt_trace {
    mt_backend *be;
    const mt_host_work *clock;
    int keep_all, step, step_first;
    int n_at_end; // spans pushed before the last step_end; later ones (the optimizer's
                  // update, which runs after a step's gradients) count in the next step
    span *spans;
    int n, cap;
    mt_event **pool;
    int pool_n, pool_used;
    mt_event *base;
    double host_base;
    pthread_mutex_t mu;
};

static const char *lane_names[MT_NUM_LANES] = {"compute stream", "h2d stream", "d2h stream",
                                               "host: gradient drain", "host: optimizer", "host: schedule"};

double mt_trace_host_now(const mt_trace *t) { return t->clock->now_ms(t->clock); }

mt_status mt_trace_create(mt_backend *be, const mt_host_work *clock, int keep_all, mt_trace **out) {
    mt_trace *t = calloc(1, sizeof *t);
    if (!t) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the trace");
    t->be = be;
    t->clock = clock;
    t->keep_all = keep_all;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return mt_backend_event_create(be, &t->base);
}

void mt_trace_destroy(mt_trace *t) {
    if (!t) return;
    for (int i = 0; i < t->pool_n; i++) mt_backend_event_destroy(t->be, t->pool[i]);
    if (t->base) mt_backend_event_destroy(t->be, t->base);
    pthread_mutex_destroy(&t->mu);
    free(t->pool);
    free(t->spans);
    free(t);
}

// Appends a span (caller holds the mutex); returns its index or -1.
static int push(mt_trace *t, const char *name, int layer, int lane) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 1024;
        span *s = realloc(t->spans, sizeof *s * (size_t)cap);
        if (!s) return -1;
        t->spans = s;
        t->cap = cap;
    }
    span *s = &t->spans[t->n];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->layer = layer;
    s->lane = lane;
    s->step = t->step;
    return t->n++;
}

static mt_status pooled_event(mt_trace *t, int *idx) {
    if (t->pool_used == t->pool_n) {
        mt_event **p = realloc(t->pool, sizeof *p * (size_t)(t->pool_n + 256));
        if (!p) return mt_fail(MT_ERR_MEMORY, "host memory: trace event pool");
        t->pool = p;
        for (int i = 0; i < 256; i++) MT_TRY(mt_backend_event_create(t->be, &t->pool[t->pool_n++]));
    }
    *idx = t->pool_used++;
    return MT_OK;
}

mt_status mt_trace_step_begin(mt_trace *t, int step) {
    pthread_mutex_lock(&t->mu);
    if (!t->keep_all) { // drop the finished step, keep what arrived after it ended
        memmove(t->spans, t->spans + t->n_at_end, sizeof *t->spans * (size_t)(t->n - t->n_at_end));
        t->n -= t->n_at_end;
        t->n_at_end = 0;
    }
    t->step = step;
    t->step_first = t->n_at_end;
    t->pool_used = 0;
    pthread_mutex_unlock(&t->mu);
    MT_TRY(mt_backend_event_record(t->be, t->base, MT_STREAM_COMPUTE));
    t->host_base = mt_trace_host_now(t);
    return MT_OK;
}

mt_status mt_trace_begin(mt_trace *t, mt_stream_id s, const char *name, int layer, int *id) {
    return mt_trace_begin_lane(t, s, (mt_lane)s, name, layer, id);
}

mt_status mt_trace_begin_lane(mt_trace *t, mt_stream_id s, mt_lane lane, const char *name, int layer, int *id) {
    int e0 = 0, e1 = 0;
    MT_TRY(pooled_event(t, &e0));
    MT_TRY(pooled_event(t, &e1));
    pthread_mutex_lock(&t->mu);
    int i = push(t, name, layer, (int)lane);
    if (i >= 0) t->spans[i].device = 1, t->spans[i].stream = (int)s, t->spans[i].ev0 = e0, t->spans[i].ev1 = e1;
    pthread_mutex_unlock(&t->mu);
    if (i < 0) return mt_fail(MT_ERR_MEMORY, "host memory: trace spans");
    *id = i;
    return mt_backend_event_record(t->be, t->pool[e0], s);
}

mt_status mt_trace_end(mt_trace *t, int id) {
    pthread_mutex_lock(&t->mu);
    mt_event *ev = t->pool[t->spans[id].ev1];
    mt_stream_id s = (mt_stream_id)t->spans[id].stream;
    pthread_mutex_unlock(&t->mu);
    return mt_backend_event_record(t->be, ev, s);
}

void mt_trace_host(mt_trace *t, mt_lane lane, const char *name, int layer, double t0, double t1) {
    pthread_mutex_lock(&t->mu);
    int i = push(t, name, layer, (int)lane);
    if (i >= 0) t->spans[i].t0 = t0, t->spans[i].t1 = t1;
    pthread_mutex_unlock(&t->mu);
}

static int by_start(const void *a, const void *b) {
    double x = ((const span *)a)->t0, y = ((const span *)b)->t0;
    return (x > y) - (x < y);
}

mt_status mt_trace_step_end(mt_trace *t, mt_phase_times *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&t->mu);
    mt_status s = MT_OK;
    for (int i = t->step_first; i < t->n && s == MT_OK; i++) {
        span *sp = &t->spans[i];
        if (!sp->device) continue;
        float a = 0, b = 0;
        s = mt_backend_event_elapsed_ms(t->be, t->base, t->pool[sp->ev0], &a);
        if (s == MT_OK) s = mt_backend_event_elapsed_ms(t->be, t->base, t->pool[sp->ev1], &b);
        sp->t0 = t->host_base + a;
        sp->t1 = t->host_base + b;
        sp->device = 2; // resolved
    }
    // Busy time per lane: the union of its spans (spans of one lane may overlap, e.g. host drains).
    int n = t->n - t->step_first;
    span *copy = malloc(sizeof *copy * (size_t)(n > 0 ? n : 1));
    if (s == MT_OK && copy) {
        memcpy(copy, t->spans + t->step_first, sizeof *copy * (size_t)n);
        qsort(copy, (size_t)n, sizeof *copy, by_start);
        double lo = 0, hi = 0, end[MT_NUM_LANES];
        for (int l = 0; l < MT_NUM_LANES; l++) end[l] = -1e300;
        for (int i = 0; i < n; i++) {
            span *sp = &copy[i];
            double a = sp->t0 > end[sp->lane] ? sp->t0 : end[sp->lane];
            if (sp->t1 > a) out->busy_ms[sp->lane] += sp->t1 - a;
            if (sp->t1 > end[sp->lane]) end[sp->lane] = sp->t1;
            if (i == 0 || sp->t0 < lo) lo = sp->t0;
            if (i == 0 || sp->t1 > hi) hi = sp->t1;
        }
        out->step_ms = hi - lo;
    }
    free(copy);
    t->n_at_end = t->n;
    pthread_mutex_unlock(&t->mu);
    return s;
}

mt_status mt_trace_write(mt_trace *t, const char *path) {
    mt_out_file out;
    MT_TRY(mt_out_open(&out, "--trace", path, MT_OUT_STREAM)); // /dev/null stays a device, a link stays a link
    FILE *f = out.f;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    for (int l = 0; l < MT_NUM_LANES; l++)
        fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n", l,
                lane_names[l]);
    pthread_mutex_lock(&t->mu);
    double origin = t->n ? t->spans[0].t0 : 0;
    for (int i = 0; i < t->n; i++)
        if (t->spans[i].t0 < origin && t->spans[i].device != 1) origin = t->spans[i].t0;
    int first = 1;
    for (int i = 0; i < t->n; i++) {
        const span *sp = &t->spans[i];
        if (sp->device == 1) continue; // never resolved (step did not finish)
        fprintf(f, "%s{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                   "\"args\":{\"step\":%d,\"layer\":%d}}",
                first ? "" : ",\n", sp->name, sp->lane, (sp->t0 - origin) * 1e3, (sp->t1 - sp->t0) * 1e3, sp->step,
                sp->layer);
        first = 0;
    }
    pthread_mutex_unlock(&t->mu);
    fprintf(f, "\n]}\n");
    return mt_out_close(&out);
}
