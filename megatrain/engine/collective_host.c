// collective_host.c: the ranks' gradients summed on the host in a fixed order.
// Contribution k = mb * N + rank of a unit waits until k-1 has landed: the host
// gradient is then built exactly as one rank builds it from N x G micro-batches
// of B/N rows (copy the first, add the others in order, each add rounded to the
// gradient's dtype), so N ranks reach one rank's parameters bit for bit.
// Deadlock-free: each rank's drain lands its units in the walk's order, and the
// contribution a rank waits for comes earlier in some rank's order.
#include <pthread.h>
#include <stdlib.h>

#include "backend/backend_call.h"
#include "engine/collective.h"

typedef struct {
    mt_collective base;
    int n_units;
    int *next; // per unit: the contribution it takes next (mb * N + rank), 0 again once final
    int aborted; // a rank failed: nothing more lands
    pthread_mutex_t mu;
    pthread_cond_t cv;
} host_coll;

static mt_status host_reduce(mt_collective *c, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                             mt_stream_id s, mt_event *ready, size_t *off, size_t *count) {
    (void)c, (void)rank, (void)dev_grad, (void)t;
    *off = 0; // every rank carries the whole unit; the host sums
    *count = n;
    return mt_backend_event_record(be, ready, s);
}

static int host_land(mt_collective *c, const mt_host_work *h, const mt_landing *l, double *sumsq) {
    host_coll *hc = (host_coll *)c;
    int N = c->n_ranks, k = l->mb * N + l->rank, total = l->G * N;
    pthread_mutex_lock(&hc->mu);
    while (hc->next[l->unit] != k && !hc->aborted) pthread_cond_wait(&hc->cv, &hc->mu);
    int aborted = hc->aborted;
    pthread_mutex_unlock(&hc->mu);
    if (aborted) return 0;
    // Alone on this unit until next[] moves on: the earlier contributions have landed, the later wait.
    size_t ws = mt_dtype_size(l->wdt);
    double sq = h->accumulate(h, (char *)l->u->grad + l->off * ws, l->wdt, l->slab, l->wire, l->count, k == 0,
                              k == total - 1);
    pthread_mutex_lock(&hc->mu);
    hc->next[l->unit] = k == total - 1 ? 0 : k + 1;
    pthread_cond_broadcast(&hc->cv);
    pthread_mutex_unlock(&hc->mu);
    *sumsq = sq;
    return k == total - 1;
}

static void host_abort(mt_collective *c) {
    host_coll *hc = (host_coll *)c;
    pthread_mutex_lock(&hc->mu);
    hc->aborted = 1;
    pthread_cond_broadcast(&hc->cv);
    pthread_mutex_unlock(&hc->mu);
}

static void host_destroy(mt_collective *c) {
    host_coll *hc = (host_coll *)c;
    pthread_mutex_destroy(&hc->mu);
    pthread_cond_destroy(&hc->cv);
    free(hc->next);
    free(hc);
}

mt_status mt_collective_host_create(int n_ranks, int n_units, mt_collective **out) {
    *out = NULL;
    host_coll *hc = calloc(1, sizeof *hc);
    int *next = calloc((size_t)n_units, sizeof *next);
    if (!hc || !next) {
        free(hc);
        free(next);
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the gradient collective");
    }
    hc->base = (mt_collective){.name = "host", .n_ranks = n_ranks, .reduce = host_reduce, .land = host_land,
                               .abort = host_abort, .destroy = host_destroy};
    hc->n_units = n_units;
    hc->next = next;
    pthread_mutex_init(&hc->mu, NULL);
    pthread_cond_init(&hc->cv, NULL);
    *out = &hc->base;
    return MT_OK;
}
