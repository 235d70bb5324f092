// hosts_mpi.c: hosts.h over MPI (Open MPI). The sum's order is fixed by gathering every
// host's gradient on host 0, adding them there in host order, and broadcasting the sum:
// MPI_Allreduce would be fewer bytes, but its order is the library's choice.
#include "engine/hosts.h"

#include <stdlib.h>

#include "core/env.h"

#ifdef MT_HAVE_MPI
#include <mpi.h>

#include "optim/grad_ops.h"

typedef struct {
    mt_hosts base;
    void *gathered; // host 0: every host's copy of one unit's gradient
    size_t gathered_bytes;
} mpi_hosts;

static mt_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return mt_fail(MT_ERR_BACKEND, "MPI: %s failed: %.*s", what, len, msg);
}

static mt_status mpi_reduce_grad(mt_hosts *h, void *grad, mt_dtype t, size_t n) {
    mpi_hosts *mh = (mpi_hosts *)h;
    size_t bytes = n * mt_dtype_size(t);
    if (bytes > (size_t)1 << 30) return mt_fail(MT_ERR_SHAPE, "MPI: a unit of %zu bytes is past this sum's 1 GiB", bytes);
    if (h->rank == 0 && bytes * h->n > mh->gathered_bytes) {
        void *p = realloc(mh->gathered, bytes * h->n);
        if (!p) return mt_fail(MT_ERR_MEMORY, "host memory: cannot gather %d hosts' gradients", h->n);
        mh->gathered = p;
        mh->gathered_bytes = bytes * h->n;
    }
    int rc = MPI_Gather(grad, (int)bytes, MPI_BYTE, mh->gathered, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Gather of a gradient");
    if (h->rank == 0) // host 0's own copy is first: add the others to it, in host order
        for (int p = 1; p < h->n; p++) mt_grad_accumulate(grad, (char *)mh->gathered + (size_t)p * bytes, t, n, 0);
    rc = MPI_Bcast(grad, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? MT_OK : mpi_fail(rc, "MPI_Bcast of a gradient");
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

static void mpi_destroy(mt_hosts *h, int abort) {
    if (abort && h->n > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    free(((mpi_hosts *)h)->gathered);
    free(h);
}

mt_status mt_hosts_mpi_create(mt_hosts **out) {
    *out = NULL;
    int provided = 0;
    // Only the main thread calls MPI (the step's tail), so FUNNELED is enough.
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread");
    mpi_hosts *mh = calloc(1, sizeof *mh);
    if (!mh) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the MPI hosts");
    MPI_Comm_rank(MPI_COMM_WORLD, &mh->base.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mh->base.n);
    mh->base.reduce_grad = mpi_reduce_grad;
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
