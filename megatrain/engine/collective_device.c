// collective_device.c: the host side of a device collective (backend/device_collective.h).
// The devices reduce; each rank then carries its own part of the reduced gradient into
// disjoint parts of the host gradient, so no host-side order is kept between ranks. A unit
// is final when all N parts of its last micro-batch have landed, its sum of squares the
// parts' in rank order (the same order every step).
#include <pthread.h>
#include <stdlib.h>

#include "engine/collective.h"

typedef struct {
    mt_collective base;
    mt_device_collective *dc;
    int *arrived;  // per unit: ranks whose last micro-batch has landed this step
    double *sumsq; // per unit and rank: the sum of squares of that rank's part
    pthread_mutex_t mu;
} dev_coll;

static mt_status dev_bind(mt_collective *c, int rank) {
    mt_device_collective *dc = ((dev_coll *)c)->dc;
    return dc->bind ? dc->bind(dc, rank) : MT_OK;
}

static mt_status dev_reduce(mt_collective *c, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                            mt_stream_id s, mt_event *ready, size_t *off, size_t *count) {
    mt_device_collective *dc = ((dev_coll *)c)->dc;
    return dc->reduce(dc, rank, be, dev_grad, t, n, s, ready, off, count);
}

static int dev_land(mt_collective *c, const mt_host_work *h, const mt_landing *l, double *sumsq) {
    dev_coll *d = (dev_coll *)c;
    size_t ws = mt_dtype_size(l->wdt);
    int last = l->mb == l->G - 1;
    // Disjoint parts: each rank builds its own across the micro-batches, as one rank builds the whole.
    double sq = h->accumulate(h, (char *)l->u->grad + l->off * ws, l->wdt, l->slab, l->wire, l->count, l->mb == 0,
                              last);
    if (!last) return 0;
    int N = c->n_ranks, final = 0;
    pthread_mutex_lock(&d->mu);
    d->sumsq[(size_t)l->unit * N + l->rank] = sq;
    if (++d->arrived[l->unit] == N) {
        double total = 0;
        for (int r = 0; r < N; r++) total += d->sumsq[(size_t)l->unit * N + r];
        d->arrived[l->unit] = 0;
        *sumsq = total;
        final = 1;
    }
    pthread_mutex_unlock(&d->mu);
    return final;
}

static void dev_abort(mt_collective *c) {
    mt_device_collective *dc = ((dev_coll *)c)->dc;
    if (dc->abort) dc->abort(dc);
}

static void dev_destroy(mt_collective *c) {
    dev_coll *d = (dev_coll *)c;
    d->dc->destroy(d->dc);
    pthread_mutex_destroy(&d->mu);
    free(d->arrived);
    free(d->sumsq);
    free(d);
}

mt_status mt_collective_device_create(mt_device_collective *dc, int n_units, mt_collective **out) {
    *out = NULL;
    dev_coll *d = calloc(1, sizeof *d);
    int *arrived = calloc((size_t)n_units, sizeof *arrived);
    double *sumsq = calloc((size_t)n_units * dc->n_ranks, sizeof *sumsq);
    if (!d || !arrived || !sumsq) {
        free(d);
        free(arrived);
        free(sumsq);
        dc->destroy(dc);
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the %s collective", dc->name);
    }
    d->base = (mt_collective){.name = dc->name, .n_ranks = dc->n_ranks, .bind = dev_bind, .reduce = dev_reduce,
                              .land = dev_land, .abort = dev_abort, .destroy = dev_destroy};
    d->dc = dc;
    d->arrived = arrived;
    d->sumsq = sumsq;
    pthread_mutex_init(&d->mu, NULL);
    *out = &d->base;
    return MT_OK;
}
