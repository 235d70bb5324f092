// host_work_real.c: the host work done for real, on the wall clock.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/host_mem.h"
#include "engine/host_state.h"
#include "optim/grad_ops.h"

static double real_accumulate(const mt_host_work *h, void *grad, mt_dtype wdt, void *slab, mt_dtype wire, size_t n,
                              int first, int last) {
    (void)h;
    if (slab == grad) return last ? mt_grad_sumsq(grad, wdt, n) : 0; // copied in place by the link
    // f32 -> bf16 in place, front to back: exact, the values were bf16 on the device
    if (wire != wdt) mt_convert(slab, wdt, slab, wire, n);
    mt_grad_accumulate(grad, slab, wdt, n, first);
    return last ? mt_grad_sumsq(grad, wdt, n) : 0;
}

// A tensor's elements at `offset` within a unit's state.
static mt_adamw_state at(const mt_adamw_state *s, size_t offset, size_t ws) {
    return (mt_adamw_state){.p = (char *)s->p + offset * ws, .m = s->m + offset, .v = s->v + offset,
                            .master = s->master ? s->master + offset : NULL};
}

static void real_adamw(const mt_host_work *h, const mt_model *m, mt_unit *u, const mt_adamw_state *out,
                       const mt_adamw_hparams *hp, float weight_decay) {
    (void)h;
    size_t ws = mt_dtype_size(m->wdt);
    mt_adamw_state own = {.p = u->param, .m = u->m, .v = u->v, .master = u->master};
    if (!out) out = &own;
    for (int t = 0; t < MT_T_COUNT; t++) {
        const mt_tensor_slot *v = &u->lay->t[t];
        if (!v->present) continue;
        float wd = v->ndim >= 2 ? weight_decay : 0.0f; // no decay on norms and biases (as torch param groups)
        mt_adamw_state o = at(out, v->offset, ws), i = at(&own, v->offset, ws);
        mt_adamw_update_to(&o, &i, m->wdt, (char *)u->grad + v->offset * ws, m->wdt, v->numel, hp, wd);
    }
}

// Tensor by tensor (its decay), the ranges inside it in one threaded pass; a range that
// straddles a tensor's start or end (a part of a layer) gives each tensor its share.
static void real_adamw_ranges(const mt_host_work *h, const mt_model *m, mt_unit *u, const mt_elem_range *r, size_t nr,
                              const mt_adamw_hparams *hp, float weight_decay) {
    (void)h;
    mt_adamw_state own = {.p = u->param, .m = u->m, .v = u->v, .master = u->master};
    for (int t = 0; t < MT_T_COUNT; t++) {
        const mt_tensor_slot *v = &u->lay->t[t];
        size_t a = v->offset, b = v->offset + v->numel;
        float wd = v->ndim >= 2 ? weight_decay : 0.0f; // as real_adamw
        for (size_t i = 0; v->present && i < nr && r[i].lo < b;) {
            size_t j = i;
            while (j < nr && r[j].lo >= a && r[j].hi <= b) j++;
            if (j > i) { // wholly inside
                mt_adamw_update_ranges(&own, m->wdt, u->grad, m->wdt, r + i, j - i, hp, wd);
                i = j;
                continue;
            }
            if (r[i].hi > a) { // across the tensor's start or end: its share
                mt_elem_range c = {r[i].lo > a ? r[i].lo : a, r[i].hi < b ? r[i].hi : b};
                mt_adamw_update_ranges(&own, m->wdt, u->grad, m->wdt, &c, 1, hp, wd);
            }
            i++;
        }
    }
}

static void real_gather_rows(const mt_host_work *h, void *dst, const void *src, mt_dtype wdt, size_t row_elems,
                             const int32_t *rows, size_t n) {
    (void)h;
    size_t rb = row_elems * mt_dtype_size(wdt);
#pragma omp parallel for schedule(static) if (n * rb >= ((size_t)1 << 22))
    for (long i = 0; i < (long)n; i++)
        memcpy((char *)dst + (size_t)i * rb, (const char *)src + (size_t)rows[i] * rb, rb);
}

static double real_mean_loss(const mt_host_work *h, const float *losses, size_t n) {
    (void)h;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += losses[i];
    return s / (double)n;
}

// Blocks come zeroed and faulted in by every thread (core/host_mem.h); pinned ones
// are page-locked by the backend as well.
static mt_status real_alloc(const mt_host_work *h, size_t bytes, int pinned, void **out) {
    if (pinned) return mt_backend_host_alloc(h->be, bytes, out);
    return mt_host_mem_alloc(bytes, out);
}

static void real_free(const mt_host_work *h, void *p, size_t bytes, int pinned) {
    if (!p) return;
    if (pinned) mt_backend_host_free(h->be, p, bytes);
    else mt_host_mem_free(p, bytes);
}

static double real_now_ms(const mt_host_work *h) {
    (void)h;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void real_spend(const mt_host_work *h, double ms) {
    for (double end = real_now_ms(h) + ms; real_now_ms(h) < end;) {
    }
}

static void real_waited_until(const mt_host_work *h, double t_ms) {
    (void)h;
    (void)t_ms; // the wait was real: the wall clock is already there
}

mt_host_work mt_host_work_real(mt_backend *be) {
    return (mt_host_work){.name = "real",
                          .be = be,
                          .accumulate = real_accumulate,
                          .adamw = real_adamw,
                          .adamw_ranges = real_adamw_ranges,
                          .gather_rows = real_gather_rows,
                          .mean_loss = real_mean_loss,
                          .alloc = real_alloc,
                          .free = real_free,
                          .now_ms = real_now_ms,
                          .shared_now_ms = real_now_ms,
                          .spend = real_spend,
                          .waited_until = real_waited_until};
}
