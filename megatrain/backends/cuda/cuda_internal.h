// cuda_internal.h: the CUDA backend's private context, the per-op host entry
// points (one .cu file per layer family defines them) and the dtype dispatch.
// The device helpers the kernels share live in cuda_device.cuh (included here);
// each family's kernels in its *_kernels.cuh.
#ifndef MT_CUDA_INTERNAL_H
#define MT_CUDA_INTERNAL_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "backend/backend_impl.h"
#include "core/env.h"
#include "core/sysinfo.h"
}
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device.cuh" // mt_bf16, mt_ld/mt_st, mt_warp_sum/max, mt_cuda_blocks

struct mt_event {
    cudaEvent_t ev;
};

struct mt_cuda_gemm_cache; // cuda_matmul.cu
struct mt_cudnn_attn;      // cudnn_attention.c (NULL until cuDNN's attention is chosen)

typedef struct {
    int device;
    cudaDeviceProp prop;
    cudaStream_t stream[MT_NUM_STREAMS]; // compute, h2d, d2h: non-blocking, created once
    cublasLtHandle_t lt;
    void *lt_workspace; // 32 MiB, used by every GEMM (all on the compute stream)
    size_t lt_workspace_bytes;
    struct mt_cuda_gemm_cache *gemm_cache;
    cublasHandle_t blas; // classic cuBLAS, created on first use: the GEMM fallback when cuBLASLt has no algorithm
    // Growable device scratch for ops that need temporaries (dtype conversion in
    // mixed GEMMs, dw partial sums, attention row stats). Stream-ordered on the
    // compute stream, so consecutive ops can reuse it.
    void *scratch;
    size_t scratch_bytes;
    // Attention implementation (cuda_attention.cu): MT_ATTN_AUTO until the first attention
    // call resolves it; attn_explicit = chosen by --attention, so cuDNN failures are errors
    // rather than a fallback to the native kernels.
    int attn, attn_explicit;
    struct mt_cudnn_attn *cudnn;
} mt_cuda_ctx;

static inline mt_cuda_ctx *mt_cuda_ctx_of(mt_backend *be) { return (mt_cuda_ctx *)be->ctx; }
static inline cudaStream_t mt_cuda_compute(mt_backend *be) { return mt_cuda_ctx_of(be)->stream[MT_STREAM_COMPUTE]; }

// Returns a scratch buffer of at least `bytes` (grows it: syncs the compute stream first).
mt_status mt_cuda_scratch(mt_backend *be, size_t bytes, void **out);
// cuda_nccl.cu (MT_HAVE_NCCL): --gpus N's device collective, NCCL on a stream of its own per rank.
mt_status mt_cuda_nccl_create(mt_backend **bes, int n_ranks, mt_device_collective **out);
static inline size_t mt_cuda_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// cuda_matmul.cu
mt_status mt_cuda_gemm_init(mt_cuda_ctx *ctx);
void mt_cuda_gemm_destroy(mt_cuda_ctx *ctx);
mt_status mt_cuda_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias, mt_dtype wdt,
                             int N, int IC, int OC);
mt_status mt_cuda_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                             const void *w, mt_dtype wdt, int N, int IC, int OC, int flags);
// cuda_norm.cu
mt_status mt_cuda_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt, int R,
                              int D, float eps);
mt_status mt_cuda_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                              const float *rstd, mt_dtype wdt, int R, int D);
mt_status mt_cuda_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                  const void *w, mt_dtype wdt, int R, int D, float eps);
mt_status mt_cuda_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                  const void *w, const float *rstd, mt_dtype wdt, int R, int D);
mt_status mt_cuda_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw, const void *kw,
                              mt_dtype wdt, int N, int NH, int NKV, int HD, float eps);
mt_status mt_cuda_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                              const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH, int NKV,
                              int HD);
// cuda_rope.cu
mt_status mt_cuda_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B, int T,
                           int NH, int NKV, int HD);
mt_status mt_cuda_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B, int T,
                           int NH, int NKV, int HD);
// cuda_attention.cu (also: mt_backend_cuda_set_attention, and the teardown of cuDNN's handle)
void mt_cuda_attention_destroy(mt_cuda_ctx *ctx);
mt_status mt_cuda_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                                int HD);
mt_status mt_cuda_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                const float *lse, int B, int T, int NH, int NKV, int HD);
// cuda_elementwise.cu
mt_status mt_cuda_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N, int C);
mt_status mt_cuda_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout, int N,
                                int C);
mt_status mt_cuda_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F);
mt_status mt_cuda_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F);
mt_status mt_cuda_add(mt_backend *be, void *out, const void *a, const void *b, size_t n);
mt_status mt_cuda_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);
// Stream-ordered conversion on an explicit stream (used by the GEMM for mixed dtypes).
mt_status mt_cuda_convert(cudaStream_t s, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);
// cuda_xent.cu
mt_status mt_cuda_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                               float dscale);

// The v heads of packed qkv rows (N tokens, (NH+2*NKV)*HD each), which q/k-norm and
// RoPE pass through unchanged, copied from src to dst (copy_rows_part_kernel).
template <typename A>
static mt_status mt_cuda_copy_v(cudaStream_t s, A *dst, const A *src, int N, int NH, int NKV, int HD) {
    const size_t stride = (size_t)(NH + 2 * NKV) * HD, off = (size_t)(NH + NKV) * HD;
    const int per = NKV * HD;
    constexpr int V = mt_vec_of<A>();
    if (HD % V == 0 && mt_cuda_aligned16(dst, src)) // then stride, off and per are multiples of V too
        copy_rows_part_kernel<A, V><<<mt_cuda_rows_grid(N, per / V, 256), 256, 0, s>>>(dst, src, N, stride, off, per / V);
    else
        copy_rows_part_kernel<A, 1><<<mt_cuda_rows_grid(N, per, 256), 256, 0, s>>>(dst, src, N, stride, off, per);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

// Calls f(A{}) with A = float or mt_bf16 per dtype (f is a generic lambda).
template <typename Fn> static inline mt_status mt_cuda_dispatch1(mt_dtype a, Fn f) {
    if (a == MT_F32) return f(float());
    return f(mt_bf16());
}
// Calls f(A{}, W{}) for the activation and weight dtypes.
template <typename Fn> static inline mt_status mt_cuda_dispatch2(mt_dtype a, mt_dtype w, Fn f) {
    if (a == MT_F32) {
        if (w == MT_F32) return f(float(), float());
        return f(float(), mt_bf16());
    }
    if (w == MT_F32) return f(mt_bf16(), float());
    return f(mt_bf16(), mt_bf16());
}

// exact/cuda_adamw.cu (built without fast math): the device optimizer, bitwise the host's.
mt_status mt_cuda_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                        size_t n, const mt_adamw_hparams *h, float wd, mt_stream_id st);
mt_status mt_cuda_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st);
mt_status mt_cuda_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st);

#endif
