// elementwise_kernels.cuh: the memory-bound elementwise kernels (device code only):
// dtype cast, residual add, SwiGLU fwd/bwd, embedding fwd/bwd, plus the CUB sort the
// embedding backward runs between its kernels. Shared by cuda_elementwise.cu (the
// backend) and lab/swiglu.cu, lab/embedding.cu. Grid-stride loops; math in f32, one
// rounding per store.
#ifndef MT_ELEMENTWISE_KERNELS_CUH
#define MT_ELEMENTWISE_KERNELS_CUH

#include <cub/device/device_radix_sort.cuh>

#include "cuda_device.cuh"

// ---- cast ----
template <typename D, typename S> __global__ void convert_kernel(D *dst, const S *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mt_st(dst, i, mt_ld(src, i));
}

// ---- add ----
template <typename A> __global__ void add_kernel(A *out, const A *a, const A *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mt_st(out, i, mt_ld(a, i) + mt_ld(b, i));
}

// ---- SwiGLU: gu rows [gate(F) | up(F)], h = silu(gate) * up ----
template <typename A> __global__ void swiglu_fwd_kernel(A *h, const A *gu, size_t N, int F) {
    size_t total = N * (size_t)F;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)F, f = i % (size_t)F;
        size_t row = n * 2 * (size_t)F;
        float g = mt_ld(gu, row + f), u = mt_ld(gu, row + F + f);
        float sig = 1.0f / (1.0f + expf(-g));
        mt_st(h, i, g * sig * u);
    }
}

template <typename A> __global__ void swiglu_bwd_kernel(A *dgu, const A *dh, const A *gu, size_t N, int F) {
    size_t total = N * (size_t)F;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)F, f = i % (size_t)F;
        size_t row = n * 2 * (size_t)F;
        float g = mt_ld(gu, row + f), u = mt_ld(gu, row + F + f), d = mt_ld(dh, i);
        float sig = 1.0f / (1.0f + expf(-g));
        float silu = g * sig;
        // d silu / dg = sig * (1 + g * (1 - sig))
        mt_st(dgu, row + f, d * u * sig * (1.0f + g * (1.0f - sig)));
        mt_st(dgu, row + F + f, d * silu);
    }
}

// ---- embedding ----
// out(N,C) = wte[ids[n]]; an id outside [0, V) cannot be reported from a kernel,
// so the caller validates ids (the data loader does) and such rows read as zeros.
template <typename A, typename W>
__global__ void embedding_fwd_kernel(A *out, const int32_t *ids, const W *wte, size_t N, int C) {
    size_t total = N * (size_t)C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)C, c = i % (size_t)C;
        int id = ids[n];
        mt_st(out, i, id >= 0 ? mt_ld(wte, (size_t)id * C + c) : 0.0f);
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
