// backends.c: one backend instance per (name, activation dtype), created on first
// use and kept for all benchmarks (a CUDA context costs far more than a benchmark).
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "mb.h"

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
