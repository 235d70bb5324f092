// norm_kernels.cuh: the RMSNorm and per-head q/k RMSNorm kernels (device code only),
// shared by cuda_norm.cu (the backend) and lab/rmsnorm.cu, lab/add_rmsnorm.cu. One warp
// per row (f32 math, NORM_WARPS rows a block), 128-bit accesses where the shapes allow;
// the forward can fuse the residual add before it, the dx pass can add into the
// residual gradient. The weight gradient is a deterministic two-stage column reduction:
// rmsnorm_dw_partial_kernel writes dw_chunks(R) row-chunk partials, dw_final_kernel
// sums them in a fixed order.
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

// One warp per row, V elements a lane per access (V = 16/sizeof(A) for 128-bit
// accesses; the host takes V = 1 unless D, the token stride and every pointer allow
// it: then each row base, a multiple of D, is aligned too). The row is read twice (the
// second read hits L1/L2); f32 math.
//
// RES (the fused residual add of add_rmsnorm_fwd): the row normalized is
// x = inp + res, stored to sum as A; the norm is taken of the stored (rounded) values,
// exactly what a separate add then rmsnorm computes. sum may alias inp or res.
template <typename A, typename W, int V, bool RES>
__global__ void rmsnorm_fwd_kernel(A *out, float *rstd, A *sum, const A *inp, const A *res, const W *w, row_map m,
                                   size_t R, int D, float eps) {
    size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= R) return; // warp-uniform
    size_t base = rm_base(m, r, D);
    float ss = 0.f;
    for (int i = lane * V; i < D; i += 32 * V) {
        float x[V];
        mt_ldv<A, V>(x, inp + base + i);
        if constexpr (RES) {
            float y[V];
            mt_ldv<A, V>(y, res + base + i);
#pragma unroll
            for (int k = 0; k < V; k++) x[k] = mt_round_as(x[k] + y[k], (const A *)nullptr);
            mt_stv<A, V>(sum + base + i, x);
        }
#pragma unroll
        for (int k = 0; k < V; k++) ss += x[k] * x[k];
    }
    ss = mt_warp_sum(ss);
    float rs = rsqrtf(ss / (float)D + eps);
    const A *xs = RES ? sum : inp; // with RES: this lane's own writes, visible to its reads
    for (int i = lane * V; i < D; i += 32 * V) {
        float x[V], g[V];
        mt_ldv<A, V>(x, xs + base + i);
        mt_ldv<W, V>(g, w + i);
#pragma unroll
        for (int k = 0; k < V; k++) x[k] = x[k] * rs * g[k];
        mt_stv<A, V>(out + base + i, x);
    }
    if (lane == 0) rstd[rm_rstd(m, r)] = rs;
}

// dx = rstd * (dy*w) - x * rstd^3 * mean(dy*w*x). Reads a row fully before writing
// it, so dinp may alias dout. ACC (rmsnorm_bwd_add): dinp += dx instead (dx rounded to
// A first, as a separate rmsnorm_bwd then add would): the residual stream's gradient
// joins in the same pass. With ACC, dinp must not alias dout or inp.
template <typename A, typename W, int V, bool ACC>
__global__ void rmsnorm_bwd_dx_kernel(A *dinp, const A *dout, const A *inp, const W *w, const float *rstd, row_map m,
                                      size_t R, int D) {
    size_t r = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= R) return;
    size_t base = rm_base(m, r, D);
    float rs = rstd[rm_rstd(m, r)];
    float dot = 0.f;
    for (int i = lane * V; i < D; i += 32 * V) {
        float dy[V], x[V], g[V];
        mt_ldv<A, V>(dy, dout + base + i);
        mt_ldv<A, V>(x, inp + base + i);
        mt_ldv<W, V>(g, w + i);
#pragma unroll
        for (int k = 0; k < V; k++) dot += dy[k] * g[k] * x[k];
    }
    dot = mt_warp_sum(dot);
    float c = rs * rs * rs * dot / (float)D;
    for (int i = lane * V; i < D; i += 32 * V) {
        float dy[V], x[V], g[V];
        mt_ldv<A, V>(dy, dout + base + i);
        mt_ldv<A, V>(x, inp + base + i);
        mt_ldv<W, V>(g, w + i);
#pragma unroll
        for (int k = 0; k < V; k++) dy[k] = rs * dy[k] * g[k] - x[k] * c;
        if constexpr (ACC) {
            float acc[V];
            mt_ldv<A, V>(acc, dinp + base + i);
#pragma unroll
            for (int k = 0; k < V; k++) dy[k] = acc[k] + mt_round_as(dy[k], (const A *)nullptr);
        }
        mt_stv<A, V>(dinp + base + i, dy);
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


static const int NORM_WARPS = 8; // rows (warps) per block of the fwd and dx kernels

// Row chunks of the dw reduction (the partial buffer holds dw_chunks(R) * D floats).
static inline int dw_chunks(size_t R) {
    size_t c = (R + 127) / 128;
    return c < 1 ? 1 : c > 256 ? 256 : (int)c;
}

#endif
