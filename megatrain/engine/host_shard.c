// host_shard.c: equal slices rounded up to MT_HOST_SHARD_ALIGN, the remainder short on the
// last host with elements (a function of n and H only: any run, any load, the same split).
#include "engine/host_shard.h"

void mt_host_shard_range(size_t n, int H, int h, size_t *off, size_t *count) {
    size_t per = (n + (size_t)H - 1) / (size_t)H;
    per = (per + MT_HOST_SHARD_ALIGN - 1) / MT_HOST_SHARD_ALIGN * MT_HOST_SHARD_ALIGN;
    size_t lo = per * (size_t)h, hi = lo + per;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    *off = lo;
    *count = hi - lo;
}
