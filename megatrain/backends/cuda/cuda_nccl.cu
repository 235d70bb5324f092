// cuda_nccl.cu: the device collective of --gpus N on CUDA (backend/device_collective.h),
// compiled only where NCCL is found (megatrain/CMakeLists.txt). Per unit and micro-batch, once
// the rank's gradient is complete on its compute stream: an in-place ncclReduceScatter leaves
// rank r the sum of every rank's elements [r*chunk, (r+1)*chunk); the last rank also takes the
// remainder (numel mod N) through an in-place ncclReduce rooted at it, so no buffer needs
// padding. The reductions run on a stream of their own per rank, ordered by events: the compute
// stream goes on with the next layer's backward meanwhile, and since every rank issues its
// units in the walk's order on that one stream, the order (and so the sum) is fixed as before.
// The engine lands each rank's part on the host (engine/collective_device.c).
// NCCL is loaded at run time, as cuDNN is (cudnn_api.h): libnccl.so.2 is not in every CUDA
// install (the lent GPU machine has it only in PyTorch's wheel) and too big for the GPU
// bundle, and a link would stop the binary starting where it is absent, even at --gpus 1.
// Only nccl.h is needed to build (MT_NCCL_LIBRARY names the file to load, as MT_CUDNN_LIBRARY).
// Not yet run on a machine with several GPUs (docs/SEVERAL_GPUS.md).
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cuda/cuda_internal.h"

// The entry points megatrain calls, resolved once per process.
static struct {
    const char *(*GetErrorString)(ncclResult_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*Reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
} nccl;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static char nccl_why[600]; // why it did not load ("" once loaded)

static void nccl_load(void) {
    const char *env = NULL;
    mt_env_text("MT_NCCL_LIBRARY", &env); // a bad value: refused by the CLI
    const char *name = env ? env : "libnccl.so.2";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(nccl_why, sizeof nccl_why, "%s: cannot load: %s", name, e ? e : "unknown error");
        return;
    }
    struct {
        void **fn;
        const char *sym;
    } syms[] = {{(void **)&nccl.GetErrorString, "ncclGetErrorString"}, {(void **)&nccl.GroupStart, "ncclGroupStart"},
                {(void **)&nccl.GroupEnd, "ncclGroupEnd"},             {(void **)&nccl.ReduceScatter, "ncclReduceScatter"},
                {(void **)&nccl.Reduce, "ncclReduce"},                 {(void **)&nccl.CommInitAll, "ncclCommInitAll"},
                {(void **)&nccl.CommDestroy, "ncclCommDestroy"},       {(void **)&nccl.CommAbort, "ncclCommAbort"}};
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*syms[i].fn = dlsym(lib, syms[i].sym))) {
            snprintf(nccl_why, sizeof nccl_why, "%s: has no %s", name, syms[i].sym);
            return;
        }
}

#define MT_NCCL_CHECK(call)                                                                                       \
    do {                                                                                                          \
        ncclResult_t r_ = (call);                                                                                 \
        if (r_ != ncclSuccess)                                                                                    \
            return mt_fail(MT_ERR_BACKEND, "nccl: %s failed: %s (%s:%d)", #call, nccl.GetErrorString(r_),         \
                           __FILE__, __LINE__);                                                                   \
    } while (0)

typedef struct {
    mt_device_collective base;
    ncclComm_t *comm;       // one per rank, from ncclCommInitAll
    int *dev;               // each rank's CUDA device
    cudaStream_t *stream;   // per rank: the reductions, apart from the compute stream
    cudaEvent_t *grad_done; // per rank: the gradient is complete on the stream that made it
    pthread_mutex_t mu;
} nccl_coll;

static ncclDataType_t nccl_type(mt_dtype t) {
    return t == MT_BF16 ? ncclBfloat16 : t == MT_F16 ? ncclFloat16 : ncclFloat32;
}

static mt_status nccl_bind(mt_device_collective *c, int rank) {
    MT_CUDA_CHECK(cudaSetDevice(((nccl_coll *)c)->dev[rank]));
    return MT_OK;
}

static mt_status nccl_reduce(mt_device_collective *c, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                             mt_stream_id s, mt_event *ready, size_t *off, size_t *count) {
    nccl_coll *nc = (nccl_coll *)c;
    size_t N = (size_t)c->n_ranks, chunk = n / N, tail = n - chunk * N, es = mt_dtype_size(t);
    cudaStream_t st = nc->stream[rank];
    MT_CUDA_CHECK(cudaEventRecord(nc->grad_done[rank], mt_cuda_ctx_of(be)->stream[s]));
    MT_CUDA_CHECK(cudaStreamWaitEvent(st, nc->grad_done[rank], 0));
    char *g = (char *)dev_grad;
    MT_NCCL_CHECK(nccl.GroupStart());
    if (chunk) // in place: rank r's result lands at its own chunk of the send buffer
        MT_NCCL_CHECK(nccl.ReduceScatter(g, g + (size_t)rank * chunk * es, chunk, nccl_type(t), ncclSum,
                                        nc->comm[rank], st));
    if (tail)
        MT_NCCL_CHECK(nccl.Reduce(g + N * chunk * es, g + N * chunk * es, tail, nccl_type(t), ncclSum, (int)N - 1,
                                 nc->comm[rank], st));
    MT_NCCL_CHECK(nccl.GroupEnd());
    MT_CUDA_CHECK(cudaEventRecord(ready->ev, st)); // what carries the part out waits for this, not for compute
    *off = (size_t)rank * chunk;
    *count = chunk + ((size_t)rank == N - 1 ? tail : 0);
    return MT_OK;
}

// A rank failed: the others' collectives would wait on the GPUs for it forever. Aborting the
// communicators ends them (with errors the walks then report); nothing reduces after this.
static void nccl_abort(mt_device_collective *c) {
    nccl_coll *nc = (nccl_coll *)c;
    pthread_mutex_lock(&nc->mu);
    for (int r = 0; r < c->n_ranks; r++)
        if (nc->comm[r]) {
            nccl.CommAbort(nc->comm[r]);
            nc->comm[r] = NULL;
        }
    pthread_mutex_unlock(&nc->mu);
}

static void nccl_destroy(mt_device_collective *c) {
    nccl_coll *nc = (nccl_coll *)c;
    for (int r = 0; r < c->n_ranks; r++) {
        if (nc->comm && nc->comm[r]) nccl.CommDestroy(nc->comm[r]);
        if (nc->dev) cudaSetDevice(nc->dev[r]);
        if (nc->stream && nc->stream[r]) cudaStreamDestroy(nc->stream[r]);
        if (nc->grad_done && nc->grad_done[r]) cudaEventDestroy(nc->grad_done[r]);
    }
    pthread_mutex_destroy(&nc->mu);
    free(nc->comm);
    free(nc->dev);
    free(nc->stream);
    free(nc->grad_done);
    free(nc);
}

mt_status mt_cuda_nccl_create(mt_backend **bes, int n_ranks, mt_device_collective **out) {
    *out = NULL;
    pthread_once(&nccl_once, nccl_load);
    if (nccl_why[0])
        return mt_fail(MT_ERR_UNSUPPORTED, "--gpus %d on cuda: NCCL reduces the gradients across the GPUs, and %s. "
                                           "HINT: install NCCL, or point MT_NCCL_LIBRARY at libnccl.so.2 (PyTorch's "
                                           "wheel has one under site-packages/nvidia/nccl/lib)", n_ranks, nccl_why);
    nccl_coll *nc = (nccl_coll *)calloc(1, sizeof *nc);
    if (!nc) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the NCCL collective");
    pthread_mutex_init(&nc->mu, NULL);
    nc->base.name = "nccl";
    nc->base.n_ranks = n_ranks;
    nc->base.bind = nccl_bind;
    nc->base.reduce = nccl_reduce;
    nc->base.abort = nccl_abort;
    nc->base.destroy = nccl_destroy;
    nc->comm = (ncclComm_t *)calloc((size_t)n_ranks, sizeof *nc->comm);
    nc->dev = (int *)calloc((size_t)n_ranks, sizeof *nc->dev);
    nc->stream = (cudaStream_t *)calloc((size_t)n_ranks, sizeof *nc->stream);
    nc->grad_done = (cudaEvent_t *)calloc((size_t)n_ranks, sizeof *nc->grad_done);
    *out = &nc->base; // destroyed by the caller on failure too
    if (!nc->comm || !nc->dev || !nc->stream || !nc->grad_done)
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the NCCL collective");
    for (int r = 0; r < n_ranks; r++) {
        nc->dev[r] = mt_cuda_ctx_of(bes[r])->device;
        for (int q = 0; q < r; q++)
            if (nc->dev[q] == nc->dev[r])
                return mt_fail(MT_ERR_ARG, "--gpus %d: ranks %d and %d are both on CUDA device %d (one rank per GPU)",
                               n_ranks, q, r, nc->dev[r]);
    }
    int was = 0;
    MT_CUDA_CHECK(cudaGetDevice(&was));
    for (int r = 0; r < n_ranks; r++) { // each on its rank's device
        MT_CUDA_CHECK(cudaSetDevice(nc->dev[r]));
        MT_CUDA_CHECK(cudaStreamCreateWithFlags(&nc->stream[r], cudaStreamNonBlocking));
        MT_CUDA_CHECK(cudaEventCreateWithFlags(&nc->grad_done[r], cudaEventDisableTiming));
    }
    MT_CUDA_CHECK(cudaSetDevice(was));
    MT_NCCL_CHECK(nccl.CommInitAll(nc->comm, n_ranks, nc->dev));
    return MT_OK;
}
