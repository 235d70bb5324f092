// host_work_priced.c: the host work priced, not done, under a backend with
// virtual time: each call costs what the backend's host_work_ms says (the
// simulator's cost model, backends/sim/sim.h), the calling thread's virtual
// clock (core/vclock.h) advances by it, and no tensor data is read or written.
#include <math.h>

#include "core/vclock.h"
#include "engine/host_state.h"

static double priced_accumulate(const mt_host_work *h, void *grad, mt_dtype wdt, void *slab, mt_dtype wire, size_t n,
                                int first, int last) {
    (void)first;
    if (slab == grad) { // in place already: only the sum of squares, on the last micro-batch
        if (last) mt_vclock_advance(mt_backend_host_work_ms(h->be, MT_HOST_GRAD_SUMSQ, n, wdt, 0));
        return 0;
    }
    mt_vclock_advance(mt_backend_host_work_ms(h->be, MT_HOST_GRAD_ACCUMULATE, n, wire, 0));
    return 0; // no data: no norm
}

// In place or out of place: the same bytes read and written.
static void priced_adamw(const mt_host_work *h, const mt_model *m, mt_unit *u, const mt_adamw_state *out,
                         const mt_adamw_hparams *hp, float weight_decay) {
    (void)out, (void)hp, (void)weight_decay;
    size_t n = 0;
    for (int t = 0; t < MT_T_COUNT; t++) n += u->lay->t[t].present ? u->lay->t[t].numel : 0;
    mt_vclock_advance(mt_backend_host_work_ms(h->be, MT_HOST_ADAMW, n, m->wdt, u->master != NULL));
}

// The elements of the ranges that lie in the unit's tensors, at the AdamW rate.
static void priced_adamw_ranges(const mt_host_work *h, const mt_model *m, mt_unit *u, const mt_elem_range *r,
                                size_t nr, const mt_adamw_hparams *hp, float weight_decay) {
    (void)hp, (void)weight_decay;
    size_t n = 0;
    for (int t = 0; t < MT_T_COUNT; t++) {
        const mt_tensor_slot *v = &u->lay->t[t];
        for (size_t i = 0; v->present && i < nr; i++) {
            size_t a = v->offset > r[i].lo ? v->offset : r[i].lo;
            size_t b = v->offset + v->numel < r[i].hi ? v->offset + v->numel : r[i].hi;
            n += a < b ? b - a : 0;
        }
    }
    mt_vclock_advance(mt_backend_host_work_ms(h->be, MT_HOST_ADAMW, n, m->wdt, u->master != NULL));
}

static void priced_gather_rows(const mt_host_work *h, void *dst, const void *src, mt_dtype wdt, size_t row_elems,
                               const int32_t *rows, size_t n) {
    (void)dst, (void)src, (void)rows;
    mt_vclock_advance(mt_backend_host_work_ms(h->be, MT_HOST_ROWS_GATHER, n * row_elems, wdt, 0));
}

static double priced_mean_loss(const mt_host_work *h, const float *losses, size_t n) {
    (void)h, (void)losses, (void)n;
    return NAN; // no data, no loss
}

// The backend reserves address space without touching it (a 1.5 TB state
// "fits" a small machine), pinned or not: the priced state is never written.
static mt_status priced_alloc(const mt_host_work *h, size_t bytes, int pinned, void **out) {
    (void)pinned;
    return mt_backend_host_alloc(h->be, bytes, out);
}

static void priced_free(const mt_host_work *h, void *p, size_t bytes, int pinned) {
    (void)pinned;
    if (p) mt_backend_host_free(h->be, p, bytes);
}

static double priced_now_ms(const mt_host_work *h) {
    (void)h;
    return mt_vclock_now();
}

static double priced_shared_now_ms(const mt_host_work *h) {
    (void)h;
    return -INFINITY; // each thread's virtual clock is its own
}

static void priced_spend(const mt_host_work *h, double ms) {
    (void)h;
    mt_vclock_advance(ms);
}

static void priced_waited_until(const mt_host_work *h, double t_ms) {
    (void)h;
    mt_vclock_join(t_ms);
}

mt_host_work mt_host_work_priced(mt_backend *be) {
    return (mt_host_work){.name = "priced", .be = be, .accumulate = priced_accumulate, .adamw = priced_adamw,
                          .adamw_ranges = priced_adamw_ranges, .gather_rows = priced_gather_rows,
                          .mean_loss = priced_mean_loss, .alloc = priced_alloc, .free = priced_free,
                          .now_ms = priced_now_ms, .shared_now_ms = priced_shared_now_ms, .spend = priced_spend,
                          .waited_until = priced_waited_until};
}

