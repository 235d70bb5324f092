// cuda_backend.cu: the "cuda" backend's ops table, context (device, 3 streams,
// cuBLASLt handle, scratch), memory, events and async copies. The layer kernels
// live in one file per family (cuda_matmul.cu, cuda_norm.cu, ...).
// Threading: copies/events may be issued from any host thread; the kernel ops
// (which share the GEMM cache and the scratch buffer) from one thread at a time.
#include "backends/cuda/cuda_internal.h"
extern "C" {
#include "core/host_mem.h"
}

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

static const size_t MT_CUDA_LT_WORKSPACE_BYTES = (size_t)32 << 20;

static void cuda_destroy(mt_backend *be) {
    if (!be) return;
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    if (ctx) {
        // Best effort: drain outstanding work before freeing what it may use.
        for (int s = 0; s < MT_NUM_STREAMS; s++)
            if (ctx->stream[s]) cudaStreamSynchronize(ctx->stream[s]);
        mt_cuda_gemm_destroy(ctx);
        mt_cuda_attention_destroy(ctx);
        if (ctx->lt) cublasLtDestroy(ctx->lt);
        if (ctx->lt_workspace) cudaFree(ctx->lt_workspace);
        if (ctx->scratch) cudaFree(ctx->scratch);
        for (int s = 0; s < MT_NUM_STREAMS; s++)
            if (ctx->stream[s]) cudaStreamDestroy(ctx->stream[s]);
        free(ctx);
    }
    free(be);
}

// NUMA node of the GPU from sysfs (-1 when unknown, e.g. single-node hosts).
static int cuda_numa_node(int device) {
    char bus[64];
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, device) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    for (char *p = bus; *p; p++) *p = (char)tolower((unsigned char)*p);
    char path[160];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", bus);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int node = -1;
    if (fscanf(f, "%d", &node) != 1) node = -1;
    fclose(f);
    return node < 0 ? -1 : node;
}

static mt_status cuda_device_info(mt_backend *be, mt_device_info *out) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.127s", ctx->prop.name);
    size_t free_b = 0, total_b = 0;
    MT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    out->mem_total_bytes = total_b;
    out->mem_free_bytes = free_b;
    out->numa_node = cuda_numa_node(ctx->device);
    out->host_mem_avail_bytes = mt_host_mem_available_bytes();
    return MT_OK;
}

// ---- memory ----
static mt_status cuda_dev_alloc(mt_backend *be, size_t bytes, void **out) {
    (void)be;
    *out = NULL;
    if (bytes == 0) bytes = 1;
    cudaError_t e = cudaMalloc(out, bytes); // never managed memory: a plan that does not fit must fail here
    if (e != cudaSuccess) {
        cudaGetLastError(); // clear the (non-sticky) OOM
        *out = NULL;
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        cudaGetLastError();
        return mt_fail(e == cudaErrorMemoryAllocation ? MT_ERR_MEMORY : MT_ERR_BACKEND,
                       "cuda: cudaMalloc of %zu bytes (%.2f GiB) failed: %s; device has %zu free of %zu bytes "
                       "(%.2f / %.2f GiB). HINT: lower --batch or --seq-len, or raise --checkpoint-interval",
                       bytes, bytes / 1073741824.0, cudaGetErrorString(e), free_b, total_b, free_b / 1073741824.0,
                       total_b / 1073741824.0);
    }
    return MT_OK;
}

static void cuda_dev_free(mt_backend *be, void *p) {
    (void)be;
    if (p) cudaFree(p);
}

// Pinned host memory. By default the block is mapped and faulted in by every thread
// (core/host_mem.h: huge pages where the OS gives them), then page-locked with
// cudaHostRegister: cudaHostAlloc faults and pins in one thread, which took most
// of a minute for a 14B-width state on the H200 host. MT_PIN=alloc keeps the old
// way (for comparison); either way the block is zeroed.
static int pin_by_register(void) {
    static const char *const how[] = {"register", "alloc"};
    int i = 0;
    mt_env_choice("MT_PIN", how, 2, 0, &i); // a bad value: refused by the CLI
    return i == 0;
}

static mt_status cuda_host_alloc(mt_backend *be, size_t bytes, void **out) {
    (void)be;
    *out = NULL;
    size_t page = 4096;
    bytes = mt_cuda_align_up(bytes ? bytes : 1, page);
    if (pin_by_register()) {
        void *p = NULL;
        MT_TRY(mt_host_mem_alloc(bytes, &p));
        cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
        if (e == cudaSuccess) {
            *out = p;
            return MT_OK;
        }
        cudaGetLastError(); // not fatal: cudaHostAlloc below says why if it fails too
        mt_host_mem_free(p, bytes);
    }
    cudaError_t e = cudaHostAlloc(out, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        return mt_fail(MT_ERR_MEMORY,
                       "cuda: cudaHostAlloc (pinned) of %zu bytes (%.2f GiB) failed: %s. HINT: check free RAM and "
                       "`ulimit -l`, or pin smaller slabs",
                       bytes, bytes / 1073741824.0, cudaGetErrorString(e));
    }
    if (((uintptr_t)*out & (page - 1)) != 0) {
        cudaFreeHost(*out);
        *out = NULL;
        return mt_fail(MT_ERR_BACKEND, "cuda: cudaHostAlloc returned a pointer that is not page-aligned");
    }
    memset(*out, 0, bytes);
    return MT_OK;
}

static void cuda_host_free(mt_backend *be, void *p, size_t bytes) {
    (void)be;
    if (!p) return;
    // A registered block is unregistered and unmapped; one from cudaHostAlloc is not registered.
    if (cudaHostUnregister(p) == cudaSuccess) {
        mt_host_mem_free(p, bytes); // it rounds to whole pages as mt_host_mem_alloc did
        return;
    }
    cudaGetLastError();
    cudaFreeHost(p);
}

// ---- streams and events ----
static mt_status cuda_event_create(mt_backend *be, mt_event **out) {
    (void)be;
    *out = NULL;
    mt_event *ev = (mt_event *)calloc(1, sizeof *ev);
    if (!ev) return mt_fail(MT_ERR_MEMORY, "cuda: out of host memory for an event");
    // Timing enabled; blocking sync so the drain thread's waits sleep instead of
    // spinning on a core the host AdamW needs.
    cudaError_t e = cudaEventCreateWithFlags(&ev->ev, cudaEventBlockingSync);
    if (e != cudaSuccess) {
        free(ev);
        return mt_cuda_check_impl(e, "cudaEventCreateWithFlags", __FILE__, __LINE__);
    }
    *out = ev;
    return MT_OK;
}

static void cuda_event_destroy(mt_backend *be, mt_event *ev) {
    (void)be;
    if (!ev) return;
    cudaEventDestroy(ev->ev);
    free(ev);
}

static mt_status check_stream(mt_stream_id s) {
    if ((int)s < 0 || (int)s >= MT_NUM_STREAMS) return mt_fail(MT_ERR_ARG, "cuda: bad stream id %d", (int)s);
    return MT_OK;
}

static mt_status cuda_event_record(mt_backend *be, mt_event *ev, mt_stream_id s) {
    MT_TRY(check_stream(s));
    MT_CUDA_CHECK(cudaEventRecord(ev->ev, mt_cuda_ctx_of(be)->stream[s]));
    return MT_OK;
}

static mt_status cuda_stream_wait(mt_backend *be, mt_stream_id s, mt_event *ev) {
    MT_TRY(check_stream(s));
    MT_CUDA_CHECK(cudaStreamWaitEvent(mt_cuda_ctx_of(be)->stream[s], ev->ev, 0));
    return MT_OK;
}

static mt_status cuda_event_sync(mt_backend *be, mt_event *ev) {
    (void)be;
    MT_CUDA_CHECK(cudaEventSynchronize(ev->ev));
    return MT_OK;
}

static mt_status cuda_stream_sync(mt_backend *be, mt_stream_id s) {
    MT_TRY(check_stream(s));
    MT_CUDA_CHECK(cudaStreamSynchronize(mt_cuda_ctx_of(be)->stream[s]));
    return MT_OK;
}

static mt_status cuda_event_elapsed_ms(mt_backend *be, mt_event *start, mt_event *end, float *ms) {
    (void)be;
    MT_CUDA_CHECK(cudaEventElapsedTime(ms, start->ev, end->ev));
    return MT_OK;
}

static mt_status cuda_copy(mt_backend *be, void *dst, const void *src, size_t bytes, mt_copy_kind kind, mt_stream_id s) {
    MT_TRY(check_stream(s));
    if (bytes == 0) return MT_OK;
    cudaMemcpyKind k = kind == MT_COPY_H2D   ? cudaMemcpyHostToDevice
                       : kind == MT_COPY_D2H ? cudaMemcpyDeviceToHost
                                             : cudaMemcpyDeviceToDevice;
    MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, mt_cuda_ctx_of(be)->stream[s]));
    return MT_OK;
}

static mt_status cuda_memset_zero(mt_backend *be, void *dst, size_t bytes, mt_stream_id s) {
    MT_TRY(check_stream(s));
    if (bytes == 0) return MT_OK;
    MT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, mt_cuda_ctx_of(be)->stream[s]));
    return MT_OK;
}

mt_status mt_cuda_scratch(mt_backend *be, size_t bytes, void **out) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    if (bytes > ctx->scratch_bytes) {
        // Earlier ops on the compute stream may still read the old buffer.
        MT_CUDA_CHECK(cudaStreamSynchronize(ctx->stream[MT_STREAM_COMPUTE]));
        if (ctx->scratch) MT_CUDA_CHECK(cudaFree(ctx->scratch));
        ctx->scratch = NULL;
        ctx->scratch_bytes = 0;
        size_t want = mt_cuda_align_up(bytes + bytes / 4, (size_t)1 << 20);
        MT_TRY(cuda_dev_alloc(be, want, &ctx->scratch));
        ctx->scratch_bytes = want;
    }
    *out = ctx->scratch;
    return MT_OK;
}

static mt_status cuda_set_attention(mt_backend *be, int impl) {
    return mt_backend_cuda_set_attention(be, (mt_attn_impl)impl);
}

static int dtype_ok(mt_dtype t) { return t == MT_F32 || t == MT_BF16; }

// f32 or bf16 activations and weights. In place: rope and add (what the interface and
// the engine use); nothing bitwise against another path. Attention through cuDNN
// (--attention cudnn): bf16 activations, head dims 64 and 128 (what it has been checked on).
static int cuda_supports(const mt_backend *be, mt_op op, const mt_op_shape *s) {
    if (op == MT_OP_CAST) return dtype_ok(s->act) && dtype_ok(s->wdt) && !(s->flags & MT_SHAPE_IN_PLACE);
    if (!dtype_ok(s->act) || (s->flags & MT_SHAPE_BITWISE)) return 0;
    if ((s->flags & MT_SHAPE_IN_PLACE) && op != MT_OP_ROPE_FWD && op != MT_OP_ROPE_BWD && op != MT_OP_ADD) return 0;
    switch (op) {
    case MT_OP_EMBEDDING_FWD: case MT_OP_EMBEDDING_BWD: case MT_OP_MATMUL_FWD: case MT_OP_MATMUL_BWD:
    case MT_OP_RMSNORM_FWD: case MT_OP_RMSNORM_BWD: case MT_OP_QK_NORM_FWD: case MT_OP_QK_NORM_BWD:
    case MT_OP_ADD_RMSNORM_FWD: case MT_OP_RMSNORM_BWD_ADD:
        return dtype_ok(s->wdt);
    case MT_OP_ATTENTION_FWD: case MT_OP_ATTENTION_BWD:
        if (s->NKV <= 0 || s->NH % s->NKV != 0 || s->HD > 256) return 0;
        if (be && mt_cuda_ctx_of((mt_backend *)be)->attn == MT_ATTN_CUDNN)
            return s->act == MT_BF16 && (s->HD == 64 || s->HD == 128);
        return 1;
    case MT_OP_ROPE_FWD: case MT_OP_ROPE_BWD:
        return s->HD % 2 == 0;
    default:
        return 1;
    }
}

extern "C" const mt_backend_entry mt_backend_cuda_entry;

static const mt_backend_ops cuda_ops = {
    /*name*/ "cuda",
    /*caps*/ MT_CAP_TENSOR_DATA | MT_CAP_PAGE_LOCKED | MT_CAP_BF16 | MT_CAP_ASYNC | MT_CAP_DEVICE_MEMORY,
    /*entry*/ &mt_backend_cuda_entry,
    cuda_destroy,
    cuda_device_info,
    cuda_dev_alloc,
    cuda_dev_free,
    cuda_host_alloc,
    cuda_host_free,
    cuda_event_create,
    cuda_event_destroy,
    cuda_event_record,
    cuda_stream_wait,
    cuda_event_sync,
    cuda_stream_sync,
    cuda_event_elapsed_ms,
    cuda_copy,
    cuda_memset_zero,
    mt_cuda_embedding_fwd,
    mt_cuda_embedding_bwd,
    mt_cuda_matmul_fwd,
    mt_cuda_matmul_bwd,
    mt_cuda_rmsnorm_fwd,
    mt_cuda_rmsnorm_bwd,
    mt_cuda_qk_norm_fwd,
    mt_cuda_qk_norm_bwd,
    mt_cuda_rope_fwd,
    mt_cuda_rope_bwd,
    mt_cuda_attention_fwd,
    mt_cuda_attention_bwd,
    mt_cuda_swiglu_fwd,
    mt_cuda_swiglu_bwd,
    mt_cuda_add,
    mt_cuda_xent_fwd_bwd,
    mt_cuda_cast,
    mt_cuda_add_rmsnorm_fwd,
    mt_cuda_rmsnorm_bwd_add,
    /*host_work_ms*/ NULL,
    /*trace_write*/ NULL,
    /*set_attention*/ cuda_set_attention,
    /*supports*/ cuda_supports,
    /*adamw*/ mt_cuda_adamw,
    /*grad_sumsq*/ mt_cuda_grad_sumsq,
    /*grad_add*/ mt_cuda_grad_add,
};

extern "C" int mt_backend_cuda_available(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n); // returns an error (no crash) without a driver
    if (e != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n > 0 ? 1 : 0;
}

static unsigned cuda_sync_flag(void) {
    static const char *const how[] = {"block", "spin", "yield", "auto"};
    static const unsigned flag[] = {cudaDeviceScheduleBlockingSync, cudaDeviceScheduleSpin, cudaDeviceScheduleYield,
                                    cudaDeviceScheduleAuto};
    int i = 0;
    mt_env_choice("MT_CUDA_SYNC", how, 4, 0, &i); // a bad value: refused by the CLI
    return flag[i];
}

static mt_status cuda_init(mt_cuda_ctx *ctx, int device) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        cudaGetLastError();
        return mt_fail(MT_ERR_UNSUPPORTED, "cuda: no usable CUDA device (%s). HINT: use --backend cpu",
                       e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
    }
    uint64_t env_dev;
    MT_TRY(mt_env_u64("MT_CUDA_DEVICE", 0, 4095, 0, &env_dev));
    ctx->device = device > 0 ? device : (int)env_dev; // device: a rank of --gpus N
    if (device > 0 && device >= n)
        return mt_fail(MT_ERR_ARG, "--gpus: device %d is out of range (this machine has %d CUDA devices)", device, n);
    if (ctx->device < 0 || ctx->device >= n)
        return mt_fail(MT_ERR_ARG, "MT_CUDA_DEVICE=%d: out of range (this machine has %d CUDA devices)", ctx->device, n);
    // How host threads wait for the GPU. The default (auto: spin with one context) keeps a
    // core busy in every waiting thread, the drain's and the host's; the host AdamW's
    // threads then share cores with spinners. Blocking waits cost microseconds a wake.
    // MT_CUDA_SYNC=spin|yield|block|auto (default block) for comparison.
    if (cudaInitDevice(ctx->device, cuda_sync_flag(), 0) != cudaSuccess) // already initialised: keep its flags
        cudaGetLastError();
    MT_CUDA_CHECK(cudaSetDevice(ctx->device));
    MT_CUDA_CHECK(cudaGetDeviceProperties(&ctx->prop, ctx->device));
    if (ctx->prop.major < 8)
        return mt_fail(MT_ERR_UNSUPPORTED, "cuda: %s has compute capability %d.%d; bf16 kernels need >= 8.0",
                       ctx->prop.name, ctx->prop.major, ctx->prop.minor);
    for (int s = 0; s < MT_NUM_STREAMS; s++)
        MT_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream[s], cudaStreamNonBlocking));
    MT_CUDA_CHECK(cublasLtCreate(&ctx->lt));
    ctx->lt_workspace_bytes = MT_CUDA_LT_WORKSPACE_BYTES;
    MT_CUDA_CHECK(cudaMalloc(&ctx->lt_workspace, ctx->lt_workspace_bytes));
    MT_TRY(mt_cuda_gemm_init(ctx));
    return MT_OK;
}

extern "C" unsigned mt_backend_cuda_caps(void) { return cuda_ops.caps; }

static mt_status cuda_create(const mt_backend_args *a, mt_backend **out) {
    return mt_backend_cuda_create_on(a->act_dtype, a->device, out);
}

// --gpus N: NCCL reduces the ranks' gradients on the GPUs (cuda_nccl.cu, backend/device_collective.h).
static mt_status cuda_collective(mt_backend **bes, int n_ranks, mt_device_collective **out) {
    *out = NULL;
#ifdef MT_HAVE_NCCL
    return mt_cuda_nccl_create(bes, n_ranks, out);
#else
    (void)bes;
    return mt_fail(MT_ERR_UNSUPPORTED,
                   "--gpus %d on --backend cuda: needs NCCL to reduce the gradients across the GPUs, and this binary "
                   "was built without it (nccl.h was not found). HINT: install NCCL (libnccl-dev) and rebuild, or run "
                   "--gpus 1",
                   n_ranks);
#endif
}

// The visible GPUs (--gpus auto); 0 without a driver.
static int cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

// MT_GEMM_FALLBACK=1: every GEMM through classic cuBLAS (cuda_matmul.cu); MT_CUDNN_DETERMINISTIC=1:
// cuDNN's backward without its f32 dQ accumulator, bitwise the same run to run.
static const mt_backend_variant cuda_variants[] = {
    {"MT_GEMM_FALLBACK=1", (1ull << MT_OP_MATMUL_FWD) | (1ull << MT_OP_MATMUL_BWD), MT_ATTN_AUTO, 0},
    {"MT_CUDNN_DETERMINISTIC=1", 1ull << MT_OP_ATTENTION_BWD, MT_ATTN_CUDNN, 1},
};

extern "C" const mt_backend_entry mt_backend_cuda_entry = {
    /*name*/ "cuda",
    /*summary*/ "one NVIDIA GPU (cuBLASLt, cuDNN attention where it loads); f32 or bf16 activations",
    /*caps*/ MT_CAP_TENSOR_DATA | MT_CAP_PAGE_LOCKED | MT_CAP_BF16 | MT_CAP_ASYNC | MT_CAP_DEVICE_MEMORY,
    /*available*/ mt_backend_cuda_available,
    /*create*/ cuda_create,
    /*supports*/ cuda_supports,
    /*variants*/ cuda_variants,
    /*n_variants*/ (int)(sizeof cuda_variants / sizeof cuda_variants[0]),
    /*device_count*/ cuda_device_count,
    /*collective*/ cuda_collective,
};

extern "C" mt_status mt_backend_cuda_create(mt_dtype act_dtype, mt_backend **out) {
    return mt_backend_cuda_create_on(act_dtype, 0, out);
}

extern "C" mt_status mt_backend_cuda_create_on(mt_dtype act_dtype, int device, mt_backend **out) {
    *out = NULL;
    if (act_dtype != MT_F32 && act_dtype != MT_BF16)
        return mt_fail(MT_ERR_ARG, "cuda: activation dtype %d is not F32 or BF16", (int)act_dtype);
    mt_backend *be = (mt_backend *)calloc(1, sizeof *be);
    mt_cuda_ctx *ctx = (mt_cuda_ctx *)calloc(1, sizeof *ctx);
    if (!be || !ctx) {
        free(be);
        free(ctx);
        return mt_fail(MT_ERR_MEMORY, "cuda: out of host memory creating the backend");
    }
    be->ops = &cuda_ops;
    be->act_dtype = act_dtype;
    be->ctx = ctx;
    mt_status s = cuda_init(ctx, device);
    if (s != MT_OK) {
        cuda_destroy(be);
        return s;
    }
    *out = be;
    return MT_OK;
}
