// sim_collective.c: --gpus N in virtual time: the device collective (backend/device_collective.h)
// priced as cuda's (NCCL's ring reduce-scatter, (N-1)/N of a unit's bytes per GPU at
// multi.collective_gbps, else multi.nvlink_gbps, else the pinned PCIe rate) on a stream of its
// own per rank: a reduction starts once every rank's gradient is complete and the previous one
// has ended, while each rank's compute stream goes on. No data: the engine's landing of each
// rank's part is what it would be. The ranks call in lockstep (one call per unit, each on its
// rank's thread), so a barrier gives every rank the same start.
#include <pthread.h>
#include <stdlib.h>

#include "backends/sim/sim_internal.h"
#include "core/vclock.h"

typedef struct {
    mt_device_collective base;
    pthread_barrier_t bar;
    double *arrive; // per rank: when its gradient is complete (this call)
    double free_ms; // when the last reduction ended
    int aborted;
} sim_coll;

static double max2(double a, double b) { return a > b ? a : b; }

// The bus rate of one GPU's part of the reduction (GB/s), as planner/ranks.c prices it.
static double rate_gbps(const mt_hw_profile *p) {
    return p->multi.collective_gbps > 0 ? p->multi.collective_gbps
           : p->multi.nvlink_gbps > 0   ? p->multi.nvlink_gbps
                                        : p->d2h_gbps;
}

static mt_status sim_reduce(mt_device_collective *dc, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                            mt_stream_id s, mt_event *ready, size_t *off, size_t *count) {
    (void)dev_grad;
    sim_coll *sc = (sim_coll *)dc;
    mt_sim_ctx *c = be->ctx;
    size_t N = (size_t)dc->n_ranks, chunk = n / N;
    if (sc->aborted) return mt_fail(MT_ERR_BACKEND, "sim: the collective was aborted (a rank failed)");
    mt_vclock_advance(MT_SIM_LAUNCH_MS);
    pthread_mutex_lock(&c->mu);
    sc->arrive[rank] = max2(c->clock[s], mt_vclock_now()); // what stream s enqueued so far: the gradient
    pthread_mutex_unlock(&c->mu);
    pthread_barrier_wait(&sc->bar);
    double start = sc->free_ms;
    for (size_t r = 0; r < N; r++) start = max2(start, sc->arrive[r]);
    double bytes = (double)(N - 1) / (double)N * (double)n * (double)mt_dtype_size(t);
    double end = start + bytes / (rate_gbps(&c->prof) * 1e6);
    pthread_barrier_wait(&sc->bar); // every rank has read arrive[] and free_ms
    if (rank == 0) sc->free_ms = end;
    pthread_mutex_lock(&c->mu);
    ready->t_ms = end;
    ready->recorded = 1;
    c->st.collective_busy_ms += end - start;
    if (end > c->st.makespan_ms) c->st.makespan_ms = end;
    pthread_mutex_unlock(&c->mu);
    *off = (size_t)rank * chunk;
    *count = chunk + ((size_t)rank == N - 1 ? n - chunk * N : 0);
    return MT_OK;
}

// A rank failed: the others may wait at the barrier for it. Nothing more is priced (the run ends).
static void sim_abort(mt_device_collective *dc) { ((sim_coll *)dc)->aborted = 1; }

static void sim_coll_destroy(mt_device_collective *dc) {
    sim_coll *sc = (sim_coll *)dc;
    pthread_barrier_destroy(&sc->bar);
    free(sc->arrive);
    free(sc);
}

mt_status mt_sim_collective_create(mt_backend **bes, int n_ranks, mt_device_collective **out) {
    (void)bes;
    *out = NULL;
    sim_coll *sc = calloc(1, sizeof *sc);
    double *arrive = calloc((size_t)n_ranks, sizeof *arrive);
    if (!sc || !arrive) {
        free(sc);
        free(arrive);
        return mt_fail(MT_ERR_MEMORY, "sim: cannot allocate the collective");
    }
    sc->base = (mt_device_collective){.name = "sim", .n_ranks = n_ranks, .reduce = sim_reduce, .abort = sim_abort,
                                      .destroy = sim_coll_destroy};
    sc->arrive = arrive;
    pthread_barrier_init(&sc->bar, NULL, (unsigned)n_ranks);
    *out = &sc->base;
    return MT_OK;
}
