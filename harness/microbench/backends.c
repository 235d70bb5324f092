// backends.c: one backend instance per (name, activation dtype), created on first
// use and kept for all benchmarks (a CUDA context costs far more than a benchmark).
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/backend_call.h"
#include "mb.h"
#include "backend/backend_registry.h"

typedef struct {
    char name[16];
    int act;
    mt_backend *be;
    char why[256];
    int tried;
} cached_backend;

static cached_backend cache[8];

struct mt_backend *mt_mb_backend(const char *name, int act_dtype, const char **why) {
    cached_backend *c = NULL;
    for (int i = 0; i < 8 && !c; i++)
        if (cache[i].tried && cache[i].act == act_dtype && !strcmp(cache[i].name, name)) c = &cache[i];
    for (int i = 0; i < 8 && !c; i++)
        if (!cache[i].tried) c = &cache[i];
    if (!c) {
        if (why) *why = "too many backends";
        return NULL;
    }
    if (!c->tried) {
        c->tried = 1;
        c->act = act_dtype;
        snprintf(c->name, sizeof c->name, "%s", name);
        const char *names[8];
        int n = mt_backend_list(names, 8), compiled = 0;
        for (int i = 0; i < n && i < 8; i++) compiled |= !strcmp(names[i], name);
        if (!compiled) snprintf(c->why, sizeof c->why, "backend '%s' not compiled into this build", name);
        else if (mt_backend_create(name, (mt_dtype)act_dtype, &c->be) != MT_OK) {
            snprintf(c->why, sizeof c->why, "backend '%s' not available: %s", name, mt_last_error());
            c->be = NULL;
        }
    }
    if (!c->be && why) *why = c->why;
    return c->be;
}

void mt_mb_backends_release(void) {
    for (int i = 0; i < 8; i++) {
        if (cache[i].be) mt_backend_destroy(cache[i].be);
        cache[i].be = NULL;
    }
}

const char *mt_mb_timer_init(mt_mb_timer *t, struct mt_backend *be) {
    *t = (mt_mb_timer){.be = be, .manual = mt_backend_has(be, MT_CAP_ASYNC)};
    if (t->manual && (mt_backend_event_create(be, &t->e0) || mt_backend_event_create(be, &t->e1)))
        return mt_last_error();
    return NULL;
}

const char *mt_mb_timer_start(mt_mb_timer *t) {
    return t->manual && mt_backend_event_record(t->be, t->e0, MT_STREAM_COMPUTE) ? mt_last_error() : NULL;
}

const char *mt_mb_timer_stop(mt_mb_timer *t, mt_mb_state *s) {
    if (!t->manual) return NULL;
    float ms = 0;
    if (mt_backend_event_record(t->be, t->e1, MT_STREAM_COMPUTE) || mt_backend_event_sync(t->be, t->e1) ||
        mt_backend_event_elapsed_ms(t->be, t->e0, t->e1, &ms))
        return mt_last_error();
    mt_mb_set_iteration_time(s, ms * 1e-3);
    return NULL;
}

void mt_mb_timer_free(mt_mb_timer *t) {
    if (t->e0) mt_backend_event_destroy(t->be, t->e0);
    if (t->e1) mt_backend_event_destroy(t->be, t->e1);
    t->e0 = t->e1 = NULL;
}
