// cuda_attention.cu: attention_fwd / attention_bwd entry points and the choice
// of implementation (--attention):
//  * cudnn: cuDNN's fused flash attention (cudnn_attention.c) for bf16
//    activations, head dims that are multiples of 8 up to 128, 16-byte aligned
//    buffers; other calls (the fp32 mode, odd head sizes) take the native kernels.
//  * native: the tensor-core (mma.sync bf16) kernels for bf16 activations with HD
//    in {32,64,96,128} and 16-byte aligned buffers, else the simple f32-math
//    kernels (the fp32 mode and odd head sizes, HD <= 256). Kernels:
//    attention_kernels.cuh; earlier versions and the benchmark live in lab/.
// Auto (the default) takes cudnn when libcudnn loads, else native, and says which
// on stderr; in auto a shape cuDNN has no engine for falls back to native (said once).
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/attention_kernels.cuh"
#ifdef MT_HAVE_CUDNN
#include "backends/cuda/cudnn_attention.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

// ---- implementation choice ----

// Once per process per message: the choice is the same for every backend a process creates.
static void say_once(int *said, const char *msg) {
    if (__atomic_exchange_n(said, 1, __ATOMIC_RELAXED)) return;
    fprintf(stderr, "megatrain: %s\n", msg);
}

void mt_cuda_attention_destroy(mt_cuda_ctx *ctx) {
#ifdef MT_HAVE_CUDNN
    mt_cudnn_attn_destroy(ctx->cudnn);
#endif
    ctx->cudnn = NULL;
}

extern "C" mt_status mt_backend_cuda_set_attention(mt_backend *be, mt_attn_impl impl) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    if (impl == MT_ATTN_CUDNN) {
#ifdef MT_HAVE_CUDNN
        if (!ctx->cudnn) {
            mt_status s = mt_cudnn_attn_create(mt_cuda_compute(be), &ctx->cudnn);
            if (s != MT_OK) {
                char why[1024];
                snprintf(why, sizeof why, "%s", mt_last_error()); // mt_fail writes the same buffer
                return mt_fail(s, "--attention cudnn: %s", why);
            }
        }
        static int said;
        char msg[768];
        snprintf(msg, sizeof msg, "attention: cudnn, %s (--attention cudnn)", mt_cudnn_attn_describe(ctx->cudnn));
        say_once(&said, msg);
#else
        return mt_fail(MT_ERR_UNSUPPORTED, "--attention cudnn: this binary was built without the cuDNN headers "
                                           "(cudnn_graph.h was not found at configure time); use --attention native");
#endif
    } else if (impl == MT_ATTN_NATIVE) {
        mt_cuda_attention_destroy(ctx); // the handle and workspace are not needed
    }
    ctx->attn = impl;
    ctx->attn_explicit = impl != MT_ATTN_AUTO;
    return MT_OK;
}

#ifdef MT_HAVE_CUDNN
// cuDNN's attention object for this call, or NULL for the native kernels.
static mt_cudnn_attn *pick_cudnn(mt_backend *be, int HD, const void *const *ptrs, int n) {
    mt_cuda_ctx *ctx = mt_cuda_ctx_of(be);
    if (ctx->attn == MT_ATTN_AUTO) { // first attention call of a backend left on auto
        static int said;
        char msg[1024];
        if (be->act_dtype != MT_BF16) { // no point loading cuDNN: its fused attention is bf16
            static int said_f32;
            ctx->attn = MT_ATTN_NATIVE;
            say_once(&said_f32, "attention: native (f32 activations; cuDNN's fused attention takes bf16)");
            return NULL;
        }
        if (mt_cudnn_attn_create(mt_cuda_compute(be), &ctx->cudnn) == MT_OK) {
            ctx->attn = MT_ATTN_CUDNN;
            snprintf(msg, sizeof msg, "attention: cudnn, %s (default; --attention native for the native kernels)",
                     mt_cudnn_attn_describe(ctx->cudnn));
        } else {
            ctx->attn = MT_ATTN_NATIVE;
            snprintf(msg, sizeof msg, "attention: native (cuDNN unavailable: %s)", mt_last_error());
        }
        say_once(&said, msg);
    }
    if (ctx->attn != MT_ATTN_CUDNN) return NULL;
    const char *why = mt_cudnn_attn_unsupported(be->act_dtype == MT_BF16, HD, ptrs, n);
    if (why) {
        static int said;
        char msg[384];
        snprintf(msg, sizeof msg, "attention: cuDNN %s (head dim %d, %s activations): these calls use the native "
                                  "kernels",
                 why, HD, mt_dtype_name(be->act_dtype));
        say_once(&said, msg);
        return NULL;
    }
    return ctx->cudnn;
}

// After a cuDNN call: its status, or MT_OK with *fallback = 1 where auto may take the native
// kernels instead (cuDNN has no engine for the shape; said once).
static mt_status cudnn_result(mt_backend *be, mt_status s, int *fallback) {
    *fallback = 0;
    if (s == MT_OK || mt_cuda_ctx_of(be)->attn_explicit || s != MT_ERR_UNSUPPORTED) return s;
    static int said;
    char msg[1024];
    snprintf(msg, sizeof msg, "attention: cuDNN has no plan for a shape, the native kernels run it: %s",
             mt_last_error());
    say_once(&said, msg);
    *fallback = 1;
    return MT_OK;
}
#endif

static mt_status check_shape(const char *op, int B, int T, int NH, int NKV, int HD) {
    if (B < 0 || T <= 0 || NH <= 0 || NKV <= 0 || HD <= 0 || NH % NKV)
        return mt_fail(MT_ERR_SHAPE, "cuda %s: bad shape B=%d T=%d NH=%d NKV=%d HD=%d (NH must be a multiple of NKV)", op,
                       B, T, NH, NKV, HD);
    if (HD > 256) return mt_fail(MT_ERR_UNSUPPORTED, "cuda %s: head dim %d > 256 is not supported", op, HD);
    if (NH > 65535 || B > 65535) return mt_fail(MT_ERR_SHAPE, "cuda %s: B=%d or NH=%d exceeds 65535", op, B, NH);
    return MT_OK;
}

static attn_params make_params(int B, int T, int NH, int NKV, int HD) {
    attn_params p;
    p.B = B;
    p.T = T;
    p.NH = NH;
    p.NKV = NKV;
    p.HD = HD;
    p.rep = NH / NKV;
    p.qkv_stride = (size_t)(NH + 2 * NKV) * HD;
    p.o_stride = (size_t)NH * HD;
    p.scale = 1.0f / sqrtf((float)HD);
    return p;
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

static int use_mma(mt_backend *be, int HD, const void *a, const void *b, const void *c) {
    if (be->act_dtype != MT_BF16) return 0;
    if (HD != 32 && HD != 64 && HD != 96 && HD != 128) return 0;
    if (mt_env_flag("MT_ATTN_SIMPLE")) return 0; // debugging aid: force the simple kernels
    return aligned16(a) && aligned16(b) && (!c || aligned16(c));
}

// Raises the kernel's dynamic shared memory limit when it needs more than 48 KB.
template <typename K> static mt_status smem_prepare(mt_backend *be, K kernel, size_t bytes) {
    size_t optin = mt_cuda_ctx_of(be)->prop.sharedMemPerBlockOptin;
    if (bytes > optin)
        return mt_fail(MT_ERR_UNSUPPORTED, "cuda attention: needs %zu bytes of shared memory, device allows %zu", bytes,
                       optin);
    if (bytes > 48 * 1024)
        MT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return MT_OK;
}

template <typename A, int NC>
static mt_status fwd_simple(mt_backend *be, A *out, float *lse, const A *qkv, attn_params p) {
    size_t smem = attn_simple_fwd_smem(p.HD);
    MT_TRY(smem_prepare(be, attn_fwd_simple_kernel<A, NC>, smem));
    dim3 grid((unsigned)((p.T + ATTN_SW - 1) / ATTN_SW), (unsigned)p.NH, (unsigned)p.B);
    attn_fwd_simple_kernel<A, NC><<<grid, ATTN_SW * 32, smem, mt_cuda_compute(be)>>>(out, lse, qkv, p);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

template <int HD> static mt_status fwd_mma(mt_backend *be, mt_bf16 *out, float *lse, const mt_bf16 *qkv, attn_params p) {
    size_t smem = attn_mma_fwd_smem<HD>();
    MT_TRY(smem_prepare(be, attn_fwd_mma_kernel<HD>, smem));
    dim3 grid((unsigned)((p.T + ATTN_MQ - 1) / ATTN_MQ), (unsigned)p.NH, (unsigned)p.B);
    attn_fwd_mma_kernel<HD><<<grid, ATTN_MW * 32, smem, mt_cuda_compute(be)>>>(out, lse, qkv, p);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                                int HD) {
    MT_TRY(check_shape("attention_fwd", B, T, NH, NKV, HD));
    if (B == 0) return MT_OK;
#ifdef MT_HAVE_CUDNN
    const void *ptrs[] = {out, lse, qkv};
    if (mt_cudnn_attn *c = pick_cudnn(be, HD, ptrs, 3)) {
        int fallback;
        mt_status s = cudnn_result(be, mt_cudnn_attn_fwd(c, out, lse, qkv, B, T, NH, NKV, HD), &fallback);
        if (!fallback) return s;
    }
#endif
    attn_params p = make_params(B, T, NH, NKV, HD);
    if (use_mma(be, HD, out, qkv, NULL)) {
        mt_bf16 *o = (mt_bf16 *)out;
        const mt_bf16 *q = (const mt_bf16 *)qkv;
        switch (HD) {
        case 32: return fwd_mma<32>(be, o, lse, q, p);
        case 64: return fwd_mma<64>(be, o, lse, q, p);
        case 96: return fwd_mma<96>(be, o, lse, q, p);
        default: return fwd_mma<128>(be, o, lse, q, p);
        }
    }
    return mt_cuda_dispatch1(be->act_dtype, [&](auto a) -> mt_status {
        using A = decltype(a);
        A *o = (A *)out;
        const A *q = (const A *)qkv;
        if (HD <= 32) return fwd_simple<A, 1>(be, o, lse, q, p);
        if (HD <= 64) return fwd_simple<A, 2>(be, o, lse, q, p);
        if (HD <= 128) return fwd_simple<A, 4>(be, o, lse, q, p);
        return fwd_simple<A, 8>(be, o, lse, q, p);
    });
}

template <typename A, int NC>
static mt_status bwd_simple(mt_backend *be, A *dqkv, const A *dout, const A *qkv, const float *lse, const float *Dd,
                            attn_params p) {
    cudaStream_t s = mt_cuda_compute(be);
    size_t smem_q = attn_simple_dq_smem(p.HD), smem_kv = attn_simple_dkv_smem(p.HD);
    MT_TRY(smem_prepare(be, attn_dq_simple_kernel<A, NC>, smem_q));
    MT_TRY(smem_prepare(be, attn_dkv_simple_kernel<A, NC>, smem_kv));
    dim3 gq((unsigned)((p.T + ATTN_SW - 1) / ATTN_SW), (unsigned)p.NH, (unsigned)p.B);
    attn_dq_simple_kernel<A, NC><<<gq, ATTN_SW * 32, smem_q, s>>>(dqkv, dout, qkv, lse, Dd, p);
    MT_CUDA_CHECK_LAUNCH();
    dim3 gk((unsigned)((p.T + ATTN_SW - 1) / ATTN_SW), (unsigned)p.NKV, (unsigned)p.B);
    attn_dkv_simple_kernel<A, NC><<<gk, ATTN_SW * 32, smem_kv, s>>>(dqkv, dout, qkv, lse, Dd, p);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

template <int HD>
static mt_status bwd_mma(mt_backend *be, mt_bf16 *dqkv, const mt_bf16 *dout, const mt_bf16 *qkv, const float *lse,
                         const float *Dd, attn_params p) {
    cudaStream_t s = mt_cuda_compute(be);
    size_t smem_q = attn_mma_dq_smem<HD>(), smem_kv = attn_mma_dkv_smem<HD>();
    MT_TRY(smem_prepare(be, attn_dq_mma_kernel<HD>, smem_q));
    MT_TRY(smem_prepare(be, attn_dkv_mma_kernel<HD>, smem_kv));
    dim3 gq((unsigned)((p.T + ATTN_MQ - 1) / ATTN_MQ), (unsigned)p.NH, (unsigned)p.B);
    attn_dq_mma_kernel<HD><<<gq, ATTN_MW * 32, smem_q, s>>>(dqkv, dout, qkv, lse, Dd, p);
    MT_CUDA_CHECK_LAUNCH();
    dim3 gk((unsigned)((p.T + ATTN_MK - 1) / ATTN_MK), (unsigned)p.NKV, (unsigned)p.B);
    attn_dkv_mma_kernel<HD><<<gk, ATTN_MW * 32, smem_kv, s>>>(dqkv, dout, qkv, lse, Dd, p);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                const float *lse, int B, int T, int NH, int NKV, int HD) {
    MT_TRY(check_shape("attention_bwd", B, T, NH, NKV, HD));
    if (B == 0) return MT_OK;
#ifdef MT_HAVE_CUDNN
    const void *ptrs[] = {dqkv, dout, qkv, out, lse};
    if (mt_cudnn_attn *c = pick_cudnn(be, HD, ptrs, 5)) {
        int fallback;
        mt_status s = cudnn_result(be, mt_cudnn_attn_bwd(c, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HD), &fallback);
        if (!fallback) return s;
    }
#endif
    attn_params p = make_params(B, T, NH, NKV, HD);
    cudaStream_t s = mt_cuda_compute(be);
    // D = rowsum(dO * O), (B,NH,T) f32 in scratch.
    void *scr = NULL;
    size_t rows = (size_t)B * T * NH;
    MT_TRY(mt_cuda_scratch(be, rows * sizeof(float), &scr));
    float *Dd = (float *)scr;
    const int warps = 8;
    size_t blocks = (rows + warps - 1) / warps;
    if (blocks > 0x7fffffffu) return mt_fail(MT_ERR_SHAPE, "cuda attention_bwd: too many rows (%zu)", rows);
    MT_TRY(mt_cuda_dispatch1(be->act_dtype, [&](auto a) -> mt_status {
        using A = decltype(a);
        attn_bwd_dot_kernel<A><<<(unsigned)blocks, warps * 32, 0, s>>>(Dd, (const A *)dout, (const A *)out, p);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    }));
    if (use_mma(be, HD, dqkv, dout, qkv)) {
        mt_bf16 *d = (mt_bf16 *)dqkv;
        const mt_bf16 *g = (const mt_bf16 *)dout, *q = (const mt_bf16 *)qkv;
        switch (HD) {
        case 32: return bwd_mma<32>(be, d, g, q, lse, Dd, p);
        case 64: return bwd_mma<64>(be, d, g, q, lse, Dd, p);
        case 96: return bwd_mma<96>(be, d, g, q, lse, Dd, p);
        default: return bwd_mma<128>(be, d, g, q, lse, Dd, p);
        }
    }
    return mt_cuda_dispatch1(be->act_dtype, [&](auto a) -> mt_status {
        using A = decltype(a);
        A *d = (A *)dqkv;
        const A *g = (const A *)dout, *q = (const A *)qkv;
        if (HD <= 32) return bwd_simple<A, 1>(be, d, g, q, lse, Dd, p);
        if (HD <= 64) return bwd_simple<A, 2>(be, d, g, q, lse, Dd, p);
        if (HD <= 128) return bwd_simple<A, 4>(be, d, g, q, lse, Dd, p);
        return bwd_simple<A, 8>(be, d, g, q, lse, Dd, p);
    });
}
