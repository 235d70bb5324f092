// cuda_norm.cu: RMSNorm and the per-head q/k RMSNorm of packed qkv, forward and
// backward. One warp per row (f32 math); the weight gradient is a deterministic
// two-stage column reduction (row-chunk partials in scratch, then a fixed-order sum).
//
// Both ops share one "row map": virtual row r of a group is head hh = ho + r % hig
// of token n = r / hig; its D elements start at n*tok_stride + hh*D and its rstd
// sits at n*hpt + hh. Plain RMSNorm is hig = hpt = 1, ho = 0, tok_stride = D;
// qk_norm is two groups (q: hig NH, ho 0; k: hig NKV, ho NH), hpt = NH+NKV.
#include "backends/cuda/cuda_internal.h"

typedef struct {
    int hig, ho, hpt;
    size_t tok_stride;
} row_map;

__device__ __forceinline__ size_t rm_base(row_map m, size_t r, int D) {
    size_t n = r / (size_t)m.hig;
    int hh = m.ho + (int)(r % (size_t)m.hig);
    return n * m.tok_stride + (size_t)hh * D;
}
__device__ __forceinline__ size_t rm_rstd(row_map m, size_t r) {
    size_t n = r / (size_t)m.hig;
    return n * (size_t)m.hpt + (size_t)(m.ho + (int)(r % (size_t)m.hig));
}

template <typename A, typename W>
__global__ void rmsnorm_fwd_kernel(A *out, float *rstd, const A *inp, const W *w, row_map m, size_t R, int D, float eps) {
    size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= R) return; // warp-uniform
    size_t base = rm_base(m, r, D);
    float ss = 0.f;
    for (int i = lane; i < D; i += 32) {
        float x = mt_ld(inp, base + i);
        ss += x * x;
    }
    ss = mt_warp_sum(ss);
    float rs = rsqrtf(ss / (float)D + eps);
    for (int i = lane; i < D; i += 32) mt_st(out, base + i, mt_ld(inp, base + i) * rs * mt_ld(w, (size_t)i));
    if (lane == 0) rstd[rm_rstd(m, r)] = rs;
}

// dx = rstd * (dy*w) - x * rstd^3 * mean(dy*w*x). Reads a row fully before
// writing it, so dinp may alias dout.
template <typename A, typename W>
__global__ void rmsnorm_bwd_dx_kernel(A *dinp, const A *dout, const A *inp, const W *w, const float *rstd, row_map m,
                                      size_t R, int D) {
    size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= R) return;
    size_t base = rm_base(m, r, D);
    float rs = rstd[rm_rstd(m, r)];
    float dot = 0.f;
    for (int i = lane; i < D; i += 32) dot += mt_ld(dout, base + i) * mt_ld(w, (size_t)i) * mt_ld(inp, base + i);
    dot = mt_warp_sum(dot);
    float c = rs * rs * rs * dot / (float)D;
    for (int i = lane; i < D; i += 32) {
        float dy = mt_ld(dout, base + i), x = mt_ld(inp, base + i);
        mt_st(dinp, base + i, rs * dy * mt_ld(w, (size_t)i) - x * c);
    }
}

// partial[chunk][c] = sum over the chunk's rows of dy*x*rstd; block (32, 8).
template <typename A>
__global__ void rmsnorm_dw_partial_kernel(float *partial, const A *dout, const A *inp, const float *rstd, row_map m,
                                          size_t R, int D, size_t rows_per_chunk) {
    __shared__ float sh[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    size_t r0 = (size_t)blockIdx.y * rows_per_chunk;
    size_t r1 = r0 + rows_per_chunk < R ? r0 + rows_per_chunk : R;
    float acc = 0.f;
    if (c < D)
        for (size_t r = r0 + threadIdx.y; r < r1; r += 8) {
            size_t i = rm_base(m, r, D) + c;
            acc += mt_ld(dout, i) * mt_ld(inp, i) * rstd[rm_rstd(m, r)];
        }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < D) {
        float s = 0.f;
        for (int y = 0; y < 8; y++) s += sh[y][threadIdx.x];
        partial[(size_t)blockIdx.y * D + c] = s;
    }
}

template <typename W> __global__ void dw_final_kernel(W *dw, const float *partial, int nchunk, int D) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    float s = 0.f;
    for (int i = 0; i < nchunk; i++) s += partial[(size_t)i * D + c];
    mt_st(dw, (size_t)c, s);
}

// Copies the v part (NKV*HD per token at offset (NH+NKV)*HD) of packed rows.
template <typename A> __global__ void copy_v_kernel(A *dst, const A *src, size_t N, int NH, int NKV, int HD) {
    size_t per = (size_t)NKV * HD, total = N * per, stride = (size_t)(NH + 2 * NKV) * HD;
    size_t off = (size_t)(NH + NKV) * HD;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t j = (i / per) * stride + off + i % per;
        dst[j] = src[j];
    }
}

static const int NORM_WARPS = 8;

template <typename A, typename W>
static mt_status norm_fwd_group(cudaStream_t s, A *out, float *rstd, const A *inp, const W *w, row_map m, size_t R, int D,
                                float eps) {
    if (R == 0) return MT_OK;
    size_t blocks = (R + NORM_WARPS - 1) / NORM_WARPS;
    if (blocks > 0x7fffffffu) return mt_fail(MT_ERR_SHAPE, "cuda rmsnorm: %zu rows is too many", R);
    rmsnorm_fwd_kernel<A, W><<<(unsigned)blocks, NORM_WARPS * 32, 0, s>>>(out, rstd, inp, w, m, R, D, eps);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

static int dw_chunks(size_t R) {
    size_t c = (R + 127) / 128;
    return c < 1 ? 1 : c > 256 ? 256 : (int)c;
}

// dw (overwritten) then dx for one row group; dw first so that dinp may alias dout.
template <typename A, typename W>
static mt_status norm_bwd_group(mt_backend *be, A *dinp, W *dw, const A *dout, const A *inp, const W *w,
                                const float *rstd, row_map m, size_t R, int D) {
    cudaStream_t s = mt_cuda_compute(be);
    if (dw) {
        if (R == 0) {
            MT_CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)D * sizeof(W), s));
        } else {
            int nchunk = dw_chunks(R);
            size_t rpc = (R + nchunk - 1) / nchunk;
            void *scr = NULL;
            MT_TRY(mt_cuda_scratch(be, (size_t)nchunk * D * sizeof(float), &scr));
            dim3 grid((unsigned)((D + 31) / 32), (unsigned)nchunk), block(32, 8);
            rmsnorm_dw_partial_kernel<A><<<grid, block, 0, s>>>((float *)scr, dout, inp, rstd, m, R, D, rpc);
            MT_CUDA_CHECK_LAUNCH();
            dw_final_kernel<W><<<(D + 255) / 256, 256, 0, s>>>(dw, (const float *)scr, nchunk, D);
            MT_CUDA_CHECK_LAUNCH();
        }
    }
    if (dinp && R > 0) {
        size_t blocks = (R + NORM_WARPS - 1) / NORM_WARPS;
        if (blocks > 0x7fffffffu) return mt_fail(MT_ERR_SHAPE, "cuda rmsnorm: %zu rows is too many", R);
        rmsnorm_bwd_dx_kernel<A, W><<<(unsigned)blocks, NORM_WARPS * 32, 0, s>>>(dinp, dout, inp, w, rstd, m, R, D);
        MT_CUDA_CHECK_LAUNCH();
    }
    return MT_OK;
}

mt_status mt_cuda_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt, int R,
                              int D, float eps) {
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cuda rmsnorm_fwd: bad shape R=%d D=%d", R, D);
    cudaStream_t s = mt_cuda_compute(be);
    row_map m = {1, 0, 1, (size_t)D};
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto ww) -> mt_status {
        using A = decltype(a);
        using W = decltype(ww);
        return norm_fwd_group<A, W>(s, (A *)out, rstd, (const A *)inp, (const W *)w, m, (size_t)R, D, eps);
    });
}

mt_status mt_cuda_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                              const float *rstd, mt_dtype wdt, int R, int D) {
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cuda rmsnorm_bwd: bad shape R=%d D=%d", R, D);
    row_map m = {1, 0, 1, (size_t)D};
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto ww) -> mt_status {
        using A = decltype(a);
        using W = decltype(ww);
        return norm_bwd_group<A, W>(be, (A *)dinp, (W *)dw, (const A *)dout, (const A *)inp, (const W *)w, rstd, m,
                                    (size_t)R, D);
    });
}

static mt_status check_qk(const char *op, int N, int NH, int NKV, int HD) {
    if (N < 0 || NH <= 0 || NKV <= 0 || HD <= 0)
        return mt_fail(MT_ERR_SHAPE, "cuda %s: bad shape N=%d NH=%d NKV=%d HD=%d", op, N, NH, NKV, HD);
    return MT_OK;
}

mt_status mt_cuda_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw, const void *kw,
                              mt_dtype wdt, int N, int NH, int NKV, int HD, float eps) {
    MT_TRY(check_qk("qk_norm_fwd", N, NH, NKV, HD));
    if (N == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    size_t stride = (size_t)(NH + 2 * NKV) * HD;
    row_map mq = {NH, 0, NH + NKV, stride}, mk = {NKV, NH, NH + NKV, stride};
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto ww) -> mt_status {
        using A = decltype(a);
        using W = decltype(ww);
        MT_TRY((norm_fwd_group<A, W>(s, (A *)out, rstd, (const A *)inp, (const W *)qw, mq, (size_t)N * NH, HD, eps)));
        MT_TRY((norm_fwd_group<A, W>(s, (A *)out, rstd, (const A *)inp, (const W *)kw, mk, (size_t)N * NKV, HD, eps)));
        if (out != inp) {
            size_t total = (size_t)N * NKV * HD;
            copy_v_kernel<A><<<mt_cuda_blocks(total, 256), 256, 0, s>>>((A *)out, (const A *)inp, (size_t)N, NH, NKV, HD);
            MT_CUDA_CHECK_LAUNCH();
        }
        return MT_OK;
    });
}

mt_status mt_cuda_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                              const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH, int NKV,
                              int HD) {
    MT_TRY(check_qk("qk_norm_bwd", N, NH, NKV, HD));
    cudaStream_t s = mt_cuda_compute(be);
    size_t stride = (size_t)(NH + 2 * NKV) * HD;
    row_map mq = {NH, 0, NH + NKV, stride}, mk = {NKV, NH, NH + NKV, stride};
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto ww) -> mt_status {
        using A = decltype(a);
        using W = decltype(ww);
        MT_TRY((norm_bwd_group<A, W>(be, (A *)dinp, (W *)dqw, (const A *)dout, (const A *)inp, (const W *)qw, rstd, mq,
                                    (size_t)N * NH, HD)));
        MT_TRY((norm_bwd_group<A, W>(be, (A *)dinp, (W *)dkw, (const A *)dout, (const A *)inp, (const W *)kw, rstd, mk,
                                    (size_t)N * NKV, HD)));
        if (dinp && dinp != dout && N > 0) {
            size_t total = (size_t)N * NKV * HD;
            copy_v_kernel<A>
                <<<mt_cuda_blocks(total, 256), 256, 0, s>>>((A *)dinp, (const A *)dout, (size_t)N, NH, NKV, HD);
            MT_CUDA_CHECK_LAUNCH();
        }
        return MT_OK;
    });
}
