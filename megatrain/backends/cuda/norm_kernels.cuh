// norm_kernels.cuh: the RMSNorm and per-head q/k RMSNorm kernels (device code only),
// shared by cuda_norm.cu (the backend) and lab/rmsnorm.cu. One warp per row (f32
// math, NORM_WARPS rows a block); the weight gradient is a deterministic two-stage
// column reduction: rmsnorm_dw_partial_kernel writes dw_chunks(R) row-chunk partials,
// dw_final_kernel sums them in a fixed order.
//
// Both ops share one "row map": virtual row r of a group is head hh = ho + r % hig
// of token n = r / hig; its D elements start at n*tok_stride + hh*D and its rstd
// sits at n*hpt + hh. Plain RMSNorm is hig = hpt = 1, ho = 0, tok_stride = D;
// qk_norm is two groups (q: hig NH, ho 0; k: hig NKV, ho NH), hpt = NH+NKV.
#ifndef MT_NORM_KERNELS_CUH
#define MT_NORM_KERNELS_CUH

#include "cuda_device.cuh"

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

static const int NORM_WARPS = 8; // rows (warps) per block of the fwd and dx kernels

// Row chunks of the dw reduction (the partial buffer holds dw_chunks(R) * D floats).
static inline int dw_chunks(size_t R) {
    size_t c = (R + 127) / 128;
    return c < 1 ? 1 : c > 256 ? 256 : (int)c;
}

#endif
