// hosts_mpi.c: hosts.h over MPI (Open MPI). The sum is a reduce-scatter then an all-gather,
// both by MPI's own collectives (MPI_Alltoallv, MPI_Allgatherv): each host owns one slice of
// every unit (engine/host_shard.h), receives every host's raw contribution to it and adds
// them itself in host order, so the bits are fixed (MPI_Reduce_scatter's order would be the
// library's) and each link carries about 2 (H-1)/H of a unit, host 0's no more than any.
// A unit goes in rounds of at most MT_HOSTS_CHUNK_BYTES per host pair: no size cap, bounded
// staging, and MPI's int counts never overflow.
#include "engine/hosts.h"

#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "engine/host_shard.h"

#ifdef MT_HAVE_MPI
#include <mpi.h>

#include "optim/grad_ops.h"

// One communicator and its staging: the main thread's (MPI_COMM_WORLD) or the optimizer worker's
// (a duplicate, so that the two threads' collectives never meet).
typedef struct {
    MPI_Comm comm;       // MPI_COMM_NULL: the lane is not there
    char *send, *recv;   // staging: hosts x chunk_bytes each
    int *counts, *displs, *counts2; // per host, in bytes (one block)
} mpi_lane;

typedef struct {
    mt_hosts base;
    size_t chunk_bytes;  // one round's bytes per host pair
    mpi_lane world, worker, drain; // the worker's and the drain's only under MPI_THREAD_MULTIPLE
} mpi_hosts;

static mt_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return mt_fail(MT_ERR_BACKEND, "MPI: %s failed: %.*s", what, len, msg);
}

// Host p's piece of round i of a slice: elements [off + i*K, +count) of the unit.
static size_t piece(size_t n, int H, int p, size_t i, size_t K, size_t *at) {
    size_t off, cnt;
    mt_host_shard_range(n, H, p, &off, &cnt);
    size_t lo = i * K < cnt ? i * K : cnt, hi = lo + K < cnt ? lo + K : cnt;
    *at = off + lo;
    return hi - lo;
}

static size_t rounds(size_t n, int H, size_t K) {
    size_t off, cnt;
    mt_host_shard_range(n, H, 0, &off, &cnt); // host 0's slice is the longest
    return cnt ? (cnt + K - 1) / K : 0;
}

// dst's slice <- (first ? 0 : dst's slice) + every host's src, in host order (dst == src: in place,
// each piece sent before its slice is written).
static mt_status reduce_scatter_on(mpi_hosts *mh, const mpi_lane *l, const void *src, void *dst, mt_dtype t, size_t n,
                                   int first) {
    const int H = mh->base.n, me = mh->base.rank;
    const size_t es = mt_dtype_size(t), K = mh->chunk_bytes / es, R = rounds(n, H, K);
    for (size_t i = 0; i < R; i++) {
        size_t at, mine = piece(n, H, me, i, K, &at);
        for (int p = 0; p < H; p++) { // every host's piece of my contribution, to its owner
            size_t pat, c = piece(n, H, p, i, K, &pat);
            memcpy(l->send + (size_t)p * K * es, (const char *)src + pat * es, c * es);
            l->counts[p] = (int)(c * es);
            l->displs[p] = (int)((size_t)p * K * es);
            l->counts2[p] = (int)(mine * es);
        }
        int rc =
            MPI_Alltoallv(l->send, l->counts, l->displs, MPI_BYTE, l->recv, l->counts2, l->displs, MPI_BYTE, l->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Alltoallv of a gradient");
        for (int q = 0; q < H; q++) // the first copied, the others added, in host order
            mt_grad_accumulate((char *)dst + at * es, l->recv + (size_t)q * K * es, t, mine, first && q == 0);
    }
    return MT_OK;
}

static mt_status mpi_reduce_scatter(mt_hosts *h, void *grad, mt_dtype t, size_t n) {
    mpi_hosts *mh = (mpi_hosts *)h;
    return reduce_scatter_on(mh, &mh->world, grad, grad, t, n, 1);
}

static mt_status mpi_reduce_scatter_add(mt_hosts *h, const void *src, void *dst, mt_dtype t, size_t n, int first) {
    mpi_hosts *mh = (mpi_hosts *)h;
    return reduce_scatter_on(mh, &mh->drain, src, dst, t, n, first);
}

static mt_status all_gather_on(mpi_hosts *mh, const mpi_lane *l, void *x, size_t elem_bytes, size_t n) {
    const int H = mh->base.n, me = mh->base.rank;
    const size_t es = elem_bytes, K = mh->chunk_bytes / es, R = rounds(n, H, K);
    for (size_t i = 0; i < R; i++) {
        size_t at, mine = piece(n, H, me, i, K, &at);
        for (int p = 0; p < H; p++) {
            size_t pat;
            l->counts[p] = (int)(piece(n, H, p, i, K, &pat) * es);
            l->displs[p] = (int)((size_t)p * K * es);
        }
        int rc = MPI_Allgatherv((char *)x + at * es, (int)(mine * es), MPI_BYTE, l->recv, l->counts, l->displs,
                                MPI_BYTE, l->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Allgatherv of a unit");
        for (int p = 0; p < H; p++) {
            size_t pat, c = piece(n, H, p, i, K, &pat);
            if (p != me) memcpy((char *)x + pat * es, l->recv + (size_t)p * K * es, c * es);
        }
    }
    return MT_OK;
}

static mt_status mpi_all_gather(mt_hosts *h, void *x, size_t elem_bytes, size_t n) {
    mpi_hosts *mh = (mpi_hosts *)h;
    return all_gather_on(mh, &mh->world, x, elem_bytes, n);
}

static mt_status mpi_all_gather_worker(mt_hosts *h, void *x, size_t elem_bytes, size_t n) {
    mpi_hosts *mh = (mpi_hosts *)h;
    return all_gather_on(mh, &mh->worker, x, elem_bytes, n);
}

// The root's x[lo, hi) <- every host's own slice of it, in rounds of a chunk, in place on the root:
// host 0 completing a tensor it saves, or a per-host save's writer of a weights file its f32 master.
static mt_status mpi_gather_to(mt_hosts *h, void *x, size_t elem_bytes, size_t n, size_t lo, size_t hi, int root) {
    mpi_hosts *mh = (mpi_hosts *)h;
    const int H = h->n;
    const size_t es = elem_bytes, K = mh->chunk_bytes / es;
    for (size_t a = lo; a < hi; a += K) { // round [a, b): each host's slice within it
        size_t b = a + K < hi ? a + K : hi, mine_at = a, mine = 0;
        for (int p = 0; p < H; p++) {
            size_t off, cnt;
            mt_host_shard_range(n, H, p, &off, &cnt);
            size_t s0 = off > a ? off : a, s1 = off + cnt < b ? off + cnt : b;
            if (s1 < s0) s1 = s0;
            mh->world.counts[p] = (int)((s1 - s0) * es);
            mh->world.displs[p] = (int)((s0 - a) * es);
            if (p == h->rank) mine_at = s0, mine = s1 - s0;
        }
        char *base = (char *)x + a * es;
        int rc = h->rank == root ? MPI_Gatherv(MPI_IN_PLACE, 0, MPI_BYTE, base, mh->world.counts, mh->world.displs,
                                               MPI_BYTE, root, MPI_COMM_WORLD)
                                 : MPI_Gatherv((char *)x + mine_at * es, (int)(mine * es), MPI_BYTE, NULL, NULL,
                                               NULL, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Gatherv of a tensor's slices to the host that writes it");
    }
    return MT_OK;
}

static mt_status mpi_gather_to_0(mt_hosts *h, void *x, size_t elem_bytes, size_t n, size_t lo, size_t hi) {
    return mpi_gather_to(h, x, elem_bytes, n, lo, hi, 0);
}

static mt_status mpi_bcast_u64(mt_hosts *h, uint64_t *v, int n) {
    (void)h;
    int rc = MPI_Bcast(v, n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? MT_OK : mpi_fail(rc, "MPI_Bcast from host 0");
}

static mt_status mpi_reduce_grad(mt_hosts *h, void *grad, mt_dtype t, size_t n) {
    MT_TRY(mpi_reduce_scatter(h, grad, t, n));
    return mpi_all_gather(h, grad, mt_dtype_size(t), n);
}

static mt_status mpi_sum_f64(mt_hosts *h, double *v, int n) {
    double *all = malloc((size_t)n * (size_t)h->n * sizeof *all);
    if (!all) return mt_fail(MT_ERR_MEMORY, "host memory: cannot gather %d hosts' sums", h->n);
    int rc = MPI_Allgather(v, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < n; i++) { // in host order, on every host: the same bits everywhere
            double s = all[i];
            for (int p = 1; p < h->n; p++) s += all[(size_t)p * n + i];
            v[i] = s;
        }
    free(all);
    return rc == MPI_SUCCESS ? MT_OK : mpi_fail(rc, "MPI_Allgather of the sums of squares");
}

static mt_status mpi_gather(mt_hosts *h, const float *mine, size_t n, float *all) {
    int rc = MPI_Allgather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? MT_OK : mpi_fail(rc, "MPI_Allgather of the losses");
}

static mt_status mpi_agree_max(mt_hosts *h, int *v, int n) {
    (void)h;
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? MT_OK : mpi_fail(rc, "MPI_Allreduce of the stop flags");
}

static void lane_free(mpi_lane *l) {
    if (l->comm != MPI_COMM_NULL && l->comm != MPI_COMM_WORLD) MPI_Comm_free(&l->comm);
    free(l->send);
    free(l->recv);
    free(l->counts);
}

static void mpi_destroy(mt_hosts *h, int abort) {
    mpi_hosts *mh = (mpi_hosts *)h;
    if (abort && h->n > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    lane_free(&mh->world);
    lane_free(&mh->worker);
    lane_free(&mh->drain);
    MPI_Finalize();
    free(mh);
}

// `sends`: the lane stages what it sends (the sum's); an all-gather sends from place.
static mt_status lane_init(mpi_lane *l, MPI_Comm comm, size_t H, size_t chunk_bytes, int sends) {
    l->comm = comm;
    l->send = sends ? malloc(H * chunk_bytes) : NULL;
    l->recv = malloc(H * chunk_bytes);
    l->counts = malloc(3 * H * sizeof(int));
    if ((sends && !l->send) || !l->recv || !l->counts)
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the hosts' sum's %zu staging bytes",
                       (sends + 1) * H * chunk_bytes);
    l->counts2 = l->counts + H;
    l->displs = l->counts + 2 * H;
    return MT_OK;
}

mt_status mt_hosts_mpi_create(mt_hosts **out) {
    *out = NULL;
    int provided = 0;
    // The main thread sums; the optimizer worker all-gathers what it updated, on a communicator
    // of its own, where MPI allows two threads (else the main thread gathers after the update).
    // MT_HOSTS_ONE_THREAD=1: ask for one thread only (the fallback, tested where MPI has both).
    int one = mt_env_flag("MT_HOSTS_ONE_THREAD");
    int rc = MPI_Init_thread(NULL, NULL, one ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread");
    mpi_hosts *mh = calloc(1, sizeof *mh);
    if (!mh) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the MPI hosts");
    mh->world.comm = mh->worker.comm = mh->drain.comm = MPI_COMM_NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &mh->base.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mh->base.n);
    // Past 1 GiB per round MPI's int byte counts could overflow; a test sets a few bytes.
    uint64_t chunk;
    mt_status s = mt_env_u64("MT_HOSTS_CHUNK_BYTES", 64, (uint64_t)1 << 30, (uint64_t)64 << 20, &chunk);
    size_t H = (size_t)mh->base.n;
    if (s == MT_OK && chunk * H > ((size_t)1 << 30)) chunk = (((size_t)1 << 30) / H) & ~(size_t)63;
    mh->chunk_bytes = (size_t)chunk;
    if (s == MT_OK) s = lane_init(&mh->world, MPI_COMM_WORLD, H, mh->chunk_bytes, 1);
    MPI_Comm dup = MPI_COMM_NULL;
    if (s == MT_OK && provided >= MPI_THREAD_MULTIPLE && MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS) {
        s = lane_init(&mh->worker, dup, H, mh->chunk_bytes, 0);
        mh->base.all_gather_worker = mpi_all_gather_worker;
        MPI_Comm dup2 = MPI_COMM_NULL;
        if (s == MT_OK && MPI_Comm_dup(MPI_COMM_WORLD, &dup2) == MPI_SUCCESS) {
            s = lane_init(&mh->drain, dup2, H, mh->chunk_bytes, 1);
            mh->base.reduce_scatter_add = mpi_reduce_scatter_add;
        }
    }
    if (s != MT_OK) {
        mpi_destroy(&mh->base, mh->base.n > 1);
        return s;
    }
    mh->base.reduce_grad = mpi_reduce_grad;
    mh->base.reduce_scatter = mpi_reduce_scatter;
    mh->base.all_gather = mpi_all_gather;
    mh->base.sum_f64 = mpi_sum_f64;
    mh->base.gather_to_0 = mpi_gather_to_0;
    mh->base.gather_to = mpi_gather_to;
    mh->base.bcast_u64 = mpi_bcast_u64;
    mh->base.gather = mpi_gather;
    mh->base.agree_max = mpi_agree_max;
    mh->base.destroy = mpi_destroy;
    *out = &mh->base;
    return MT_OK;
}
#else
mt_status mt_hosts_mpi_create(mt_hosts **out) {
    *out = NULL;
    return mt_fail(MT_ERR_UNSUPPORTED, "started by mpirun, but this megatrain was built without MPI. HINT: install "
                                       "Open MPI (libopenmpi-dev) and rebuild, or run it without mpirun");
}
#endif

mt_status mt_hosts_size_from_env(int *n) {
    uint64_t ompi, pmi;
    MT_TRY(mt_env_u64("OMPI_COMM_WORLD_SIZE", 1, 1 << 20, 0, &ompi));
    MT_TRY(mt_env_u64("PMI_SIZE", 1, 1 << 20, 0, &pmi));
    *n = (int)(ompi ? ompi : pmi);
    return MT_OK;
}

int mt_hosts_launched(void) {
    int n = 0;
    return mt_hosts_size_from_env(&n) == MT_OK && n > 1; // a bad value: refused by the CLI
}
