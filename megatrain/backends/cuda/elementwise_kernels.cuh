// elementwise_kernels.cuh: the memory-bound elementwise kernels (device code only):
// dtype cast, residual add, SwiGLU fwd/bwd, embedding fwd/bwd, plus the CUB sort the
// embedding backward runs between its kernels. Shared by cuda_elementwise.cu (the
// backend) and lab/elementwise.cu, lab/swiglu.cu, lab/embedding.cu (which keep the
// earlier versions). Math in f32, one rounding per store.
#ifndef MT_ELEMENTWISE_KERNELS_CUH
#define MT_ELEMENTWISE_KERNELS_CUH

#include <cub/device/device_radix_sort.cuh>

#include "cuda_device.cuh"

// Every kernel takes V, the elements one thread moves per access: V = 16/sizeof
// (8 bf16, 4 f32; cast: 8 of each) for 128-bit loads and stores when the host has
// checked the contract (16-byte aligned pointers; rows a multiple of V long), V = 1
// otherwise (the scalar fallback, same code). Rows run along grid.y and columns
// along grid.x, both grid-stride: no per-element division.

// ---- cast: dst(n) = src(n) ----
// The first nv = n / V groups of V elements vectorized, then the tail element by element.
template <typename D, typename S, int V> __global__ void convert_kernel(D *dst, const S *src, size_t nv, size_t n) {
    size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t g = i0; g < nv; g += stride) {
        float f[V];
        mt_ldv<S, V>(f, src + g * V);
        mt_stv<D, V>(dst + g * V, f);
    }
    for (size_t i = nv * V + i0; i < n; i += stride) mt_st(dst, i, mt_ld(src, i));
}

// ---- add: out(n) = a(n) + b(n) (out may alias a or b: each element is read before it is written) ----
template <typename A, int V> __global__ void add_kernel(A *out, const A *a, const A *b, size_t nv, size_t n) {
    size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t g = i0; g < nv; g += stride) {
        float x[V], y[V];
        mt_ldv<A, V>(x, a + g * V);
        mt_ldv<A, V>(y, b + g * V);
#pragma unroll
        for (int k = 0; k < V; k++) x[k] += y[k];
        mt_stv<A, V>(out + g * V, x);
    }
    for (size_t i = nv * V + i0; i < n; i += stride) mt_st(out, i, mt_ld(a, i) + mt_ld(b, i));
}

// ---- SwiGLU: gu rows [gate(F) | up(F)], h = silu(gate) * up; FV = F / V vectors per row ----
template <typename A, int V> __global__ void swiglu_fwd_kernel(A *h, const A *gu, int N, int F, int FV) {
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        const A *g = gu + (size_t)n * 2 * F, *u = g + F;
        A *o = h + (size_t)n * F;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < FV; c += gridDim.x * blockDim.x) {
            float gv[V], uv[V];
            mt_ldv<A, V>(gv, g + c * V);
            mt_ldv<A, V>(uv, u + c * V);
#pragma unroll
            for (int k = 0; k < V; k++) gv[k] = gv[k] / (1.0f + expf(-gv[k])) * uv[k];
            mt_stv<A, V>(o + c * V, gv);
        }
    }
}

// dgate = dh * up * sig * (1 + g (1 - sig)),  dup = dh * silu(g)
template <typename A, int V> __global__ void swiglu_bwd_kernel(A *dgu, const A *dh, const A *gu, int N, int F, int FV) {
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        const size_t row = (size_t)n * 2 * F;
        const A *g = gu + row, *u = g + F, *d = dh + (size_t)n * F;
        A *dg = dgu + row, *du = dg + F;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < FV; c += gridDim.x * blockDim.x) {
            float gv[V], uv[V], dv[V];
            mt_ldv<A, V>(gv, g + c * V);
            mt_ldv<A, V>(uv, u + c * V);
            mt_ldv<A, V>(dv, d + c * V);
#pragma unroll
            for (int k = 0; k < V; k++) {
                float sig = 1.0f / (1.0f + expf(-gv[k])), silu = gv[k] * sig;
                gv[k] = dv[k] * uv[k] * sig * (1.0f + gv[k] * (1.0f - sig));
                uv[k] = dv[k] * silu;
            }
            mt_stv<A, V>(dg + c * V, gv);
            mt_stv<A, V>(du + c * V, uv);
        }
    }
}

// ---- embedding ----
// out(N,C) = wte[ids[n]]; an id outside [0, V) cannot be reported from a kernel,
// so the caller validates ids (the data loader does) and a negative id reads as zeros.
// V elements of A per access; the table is read as V elements of W (32 bytes for a
// bf16 row of an f32 table, element-wise for an f32 row of a bf16 table). CV = C / V.
template <typename A, typename W, int V>
__global__ void embedding_fwd_kernel(A *out, const int32_t *ids, const W *wte, int N, int C, int CV) {
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        const int id = ids[n];
        const W *w = wte + (size_t)(id < 0 ? 0 : id) * C;
        A *o = out + (size_t)n * C;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < CV; c += gridDim.x * blockDim.x) {
            float f[V];
            if (id >= 0) {
                mt_ldv<W, V>(f, w + c * V);
            } else {
#pragma unroll
                for (int k = 0; k < V; k++) f[k] = 0.f;
            }
            mt_stv<A, V>(o + c * V, f);
        }
    }
}

// dwte[ids[n]] += dout[n], deterministic and with ONE rounding per touched row,
// in the cpu backend's order. (Fix: per-token atomics rounded a bf16 dwte after
// every add, so a token repeated k times lost ~log2(k) bits against the cpu
// oracle's f32 sum, and f32 results depended on atomic order.) The ids are
// stably radix-sorted with their positions (CUB), then one block per (run of
// equal ids, 256 columns) sums acc = dwte[id] + dout[n1] + dout[n2] + ... in f32
// in ascending n and stores once: bitwise the cpu's result for f32.
static const int EMB_COLS = 256;

__global__ void iota_kernel(int32_t *p, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i;
}

template <typename A, typename W>
__global__ void __launch_bounds__(EMB_COLS)
    embedding_bwd_sorted_kernel(W *dwte, const int32_t *sid, const int32_t *spos, const A *dout, int N, int C) {
    __shared__ int32_t s_pos[EMB_COLS];
    int i = blockIdx.x, id = sid[i];
    if (id < 0 || (i > 0 && sid[i - 1] == id)) return; // not a run start (block-uniform)
    int c = blockIdx.y * EMB_COLS + threadIdx.x;
    size_t row = (size_t)id * C + c;
    float acc = c < C ? mt_ld(dwte, row) : 0.f;
    for (int k0 = i; k0 < N; k0 += EMB_COLS) {
        int k = k0 + threadIdx.x;
        bool in = k < N && sid[k] == id; // the run is contiguous: `in` holds for a prefix
        s_pos[threadIdx.x] = in ? spos[k] : 0;
        int cnt = __syncthreads_count(in); // also the barrier that publishes s_pos
        if (c < C)
            for (int j = 0; j < cnt; j++) acc += mt_ld(dout, (size_t)s_pos[j] * C + c);
        __syncthreads(); // s_pos is rewritten next round
        if (cnt < EMB_COLS) break;
    }
    if (c < C) mt_st(dwte, row, acc);
}

// The stable radix sort of (id, position) pairs over all 32 key bits (CUB) on stream s,
// between iota_kernel and embedding_bwd_sorted_kernel; temp == NULL only sets temp_bytes.
static inline cudaError_t emb_sort_pairs(void *temp, size_t &temp_bytes, const int32_t *ids, int32_t *sid,
                                         const int32_t *pos, int32_t *spos, int N, cudaStream_t s) {
    return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, sid, pos, spos, N, 0, 32, s);
}

#endif
