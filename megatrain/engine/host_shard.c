// host_shard.c: equal slices rounded up to MT_HOST_SHARD_ALIGN, the remainder short on the
// last host with elements (a function of n and H only: any run, any load, the same split).
#include "engine/host_shard.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/host_shard_save.h"
#include "engine/host_state.h"
#include "engine/hosts.h"

void mt_host_shard_range(size_t n, int H, int h, size_t *off, size_t *count) {
    size_t per = (n + (size_t)H - 1) / (size_t)H;
    per = (per + MT_HOST_SHARD_ALIGN - 1) / MT_HOST_SHARD_ALIGN * MT_HOST_SHARD_ALIGN;
    size_t lo = per * (size_t)h, hi = lo + per;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    *off = lo;
    *count = hi - lo;
}

// The whole pages of x[lo, hi) (floats): DONTNEED zero-fills them on the next touch.
static void release_floats(float *x, size_t lo, size_t hi) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)(x + lo), b = (uintptr_t)(x + hi);
    a = (a + page - 1) / page * page;
    b = b / page * page;
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED); // advice: a refusal only keeps the pages
}

void mt_host_shard_release(mt_unit *u, int H, int h) {
    size_t off, cnt, n = u->lay->numel;
    mt_host_shard_range(n, H, h, &off, &cnt);
    float *arrays[3] = {u->m, u->v, u->master};
    for (int i = 0; i < 3; i++) {
        if (!arrays[i]) continue;
        release_floats(arrays[i], 0, off);
        release_floats(arrays[i], off + cnt, n);
    }
}

// Which unit and array (0 m, 1 v, 2 master) data points into, at which element; 0 if none.
static int locate(const mt_model *m, const void *data, int *unit, int *array, size_t *at) {
    for (int u = 0; u < m->n_units; u++) {
        const mt_unit *x = &m->units[u];
        const float *arrays[3] = {x->m, x->v, x->master};
        for (int a = 0; a < 3; a++) {
            const float *p = data;
            if (arrays[a] && p >= arrays[a] && p < arrays[a] + x->lay->numel) {
                *unit = u, *array = a, *at = (size_t)(p - arrays[a]);
                return 1;
            }
        }
    }
    return 0;
}

static float *array_of(mt_unit *x, int a) { return a == 0 ? x->m : a == 1 ? x->v : x->master; }

mt_status mt_host_shard_fetch(const void *shards, const void *data, size_t numel) {
    const mt_model_shards *s = shards;
    int u, a;
    size_t at;
    if (!locate(s->m, data, &u, &a, &at)) return MT_OK;
    uint64_t cmd[5] = {1, (uint64_t)u, (uint64_t)a, at, at + numel};
    MT_TRY(s->hosts->bcast_u64(s->hosts, cmd, 5));
    mt_unit *x = &s->m->units[u];
    return s->hosts->gather_to_0(s->hosts, array_of(x, a), sizeof(float), x->lay->numel, at, at + numel);
}

void mt_host_shard_drop(const void *shards, const void *data, size_t numel) {
    const mt_model_shards *s = shards;
    int u, a;
    size_t at, off, cnt;
    if (!locate(s->m, data, &u, &a, &at)) return;
    mt_unit *x = &s->m->units[u];
    mt_host_shard_range(x->lay->numel, s->hosts->n, s->hosts->rank, &off, &cnt);
    float *arr = array_of(x, a);
    size_t end = at + numel;
    if (at < off) release_floats(arr, at, end < off ? end : off);
    if (end > off + cnt) release_floats(arr, at > off + cnt ? at : off + cnt, end);
}

mt_status mt_host_shard_serve(const mt_model_shards *s) {
    for (;;) {
        uint64_t cmd[5] = {0};
        MT_TRY(s->hosts->bcast_u64(s->hosts, cmd, 5));
        if (cmd[0] == 0) return MT_OK;
        if (cmd[0] == 2) { // a per-host save: this host writes its part
            MT_TRY(mt_host_shard_save_follow(s, cmd));
            continue;
        }
        if (cmd[1] >= (uint64_t)s->m->n_units || cmd[2] > 2 || !array_of(&s->m->units[cmd[1]], (int)cmd[2]))
            return mt_fail(MT_ERR_BACKEND, "several hosts: host 0 asked for a tensor this host does not have");
        mt_unit *x = &s->m->units[cmd[1]];
        MT_TRY(s->hosts->gather_to_0(s->hosts, array_of(x, (int)cmd[2]), sizeof(float), x->lay->numel, cmd[3], cmd[4]));
    }
}

mt_status mt_host_shard_done(const mt_model_shards *s) {
    uint64_t cmd[5] = {0};
    return s->hosts->bcast_u64(s->hosts, cmd, 5);
}
