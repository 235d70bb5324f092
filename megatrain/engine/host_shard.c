// host_shard.c: equal slices rounded up to MT_HOST_SHARD_ALIGN, the remainder short on the
// last host with elements (a function of n and H only: any run, any load, the same split).
#include "engine/host_shard.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

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

mt_status mt_host_shard_collect(mt_unit *u, mt_hosts *hosts) {
    float *arrays[3] = {u->m, u->v, u->master};
    for (int i = 0; i < 3; i++)
        if (arrays[i]) MT_TRY(hosts->all_gather(hosts, arrays[i], sizeof(float), u->lay->numel));
    return MT_OK;
}
