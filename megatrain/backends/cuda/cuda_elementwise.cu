// cuda_elementwise.cu: embedding fwd/bwd, SwiGLU fwd/bwd, residual add, dtype
// cast. Memory-bound grid-stride kernels; math in f32, one rounding per store.
#include "backends/cuda/cuda_internal.h"

#include <cub/device/device_radix_sort.cuh>

// ---- cast ----
template <typename D, typename S> __global__ void convert_kernel(D *dst, const S *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mt_st(dst, i, mt_ld(src, i));
}

mt_status mt_cuda_convert(cudaStream_t s, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    if (n == 0) return MT_OK;
    if (dt == st) {
        if (dst != src) MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * mt_dtype_size(dt), cudaMemcpyDeviceToDevice, s));
        return MT_OK;
    }
    if (dt == MT_BF16)
        convert_kernel<mt_bf16, float><<<mt_cuda_blocks(n, 256), 256, 0, s>>>((mt_bf16 *)dst, (const float *)src, n);
    else
        convert_kernel<float, mt_bf16><<<mt_cuda_blocks(n, 256), 256, 0, s>>>((float *)dst, (const mt_bf16 *)src, n);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    if ((dt != MT_F32 && dt != MT_BF16) || (st != MT_F32 && st != MT_BF16))
        return mt_fail(MT_ERR_ARG, "cuda cast: bad dtypes %d -> %d", (int)st, (int)dt);
    return mt_cuda_convert(mt_cuda_compute(be), dst, dt, src, st, n);
}

// ---- add ----
template <typename A> __global__ void add_kernel(A *out, const A *a, const A *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mt_st(out, i, mt_ld(a, i) + mt_ld(b, i));
}

mt_status mt_cuda_add(mt_backend *be, void *out, const void *a, const void *b, size_t n) {
    if (n == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch1(be->act_dtype, [&](auto x) -> mt_status {
        using A = decltype(x);
        add_kernel<A><<<mt_cuda_blocks(n, 256), 256, 0, s>>>((A *)out, (const A *)a, (const A *)b, n);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
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

mt_status mt_cuda_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F) {
    if (N < 0 || F < 0) return mt_fail(MT_ERR_SHAPE, "cuda swiglu_fwd: bad shape N=%d F=%d", N, F);
    if (N == 0 || F == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch1(be->act_dtype, [&](auto x) -> mt_status {
        using A = decltype(x);
        size_t total = (size_t)N * F;
        swiglu_fwd_kernel<A><<<mt_cuda_blocks(total, 256), 256, 0, s>>>((A *)h, (const A *)gu, (size_t)N, F);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
}

mt_status mt_cuda_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F) {
    if (N < 0 || F < 0) return mt_fail(MT_ERR_SHAPE, "cuda swiglu_bwd: bad shape N=%d F=%d", N, F);
    if (N == 0 || F == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch1(be->act_dtype, [&](auto x) -> mt_status {
        using A = decltype(x);
        size_t total = (size_t)N * F;
        swiglu_bwd_kernel<A>
            <<<mt_cuda_blocks(total, 256), 256, 0, s>>>((A *)dgu, (const A *)dh, (const A *)gu, (size_t)N, F);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
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

mt_status mt_cuda_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N, int C) {
    if (N < 0 || C <= 0) return mt_fail(MT_ERR_SHAPE, "cuda embedding_fwd: bad shape N=%d C=%d", N, C);
    if (N == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto w) -> mt_status {
        using A = decltype(a);
        using W = decltype(w);
        size_t total = (size_t)N * C;
        embedding_fwd_kernel<A, W>
            <<<mt_cuda_blocks(total, 256), 256, 0, s>>>((A *)out, ids, (const W *)wte, (size_t)N, C);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
}

mt_status mt_cuda_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout, int N,
                                int C) {
    if (N < 0 || C <= 0) return mt_fail(MT_ERR_SHAPE, "cuda embedding_bwd: bad shape N=%d C=%d", N, C);
    if (N == 0) return MT_OK;
    if ((C + EMB_COLS - 1) / EMB_COLS > 65535) return mt_fail(MT_ERR_SHAPE, "cuda embedding_bwd: C=%d too wide", C);
    cudaStream_t s = mt_cuda_compute(be);
    // Scratch: sorted ids | positions | sorted positions | CUB temp (all stream-ordered).
    size_t temp_bytes = 0;
    MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, (const int32_t *)NULL, (int32_t *)NULL,
                                                  (const int32_t *)NULL, (int32_t *)NULL, N, 0, 32, s));
    size_t vec = mt_cuda_align_up((size_t)N * 4, 256);
    void *scr = NULL;
    MT_TRY(mt_cuda_scratch(be, 3 * vec + mt_cuda_align_up(temp_bytes, 256), &scr));
    int32_t *sid = (int32_t *)scr, *pos = (int32_t *)((char *)scr + vec), *spos = (int32_t *)((char *)scr + 2 * vec);
    void *temp = (char *)scr + 3 * vec;
    iota_kernel<<<mt_cuda_blocks((size_t)N, 256), 256, 0, s>>>(pos, N);
    MT_CUDA_CHECK_LAUNCH();
    MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, sid, pos, spos, N, 0, 32, s)); // stable
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto w) -> mt_status {
        using A = decltype(a);
        using W = decltype(w);
        dim3 grid((unsigned)N, (unsigned)((C + EMB_COLS - 1) / EMB_COLS));
        embedding_bwd_sorted_kernel<A, W><<<grid, EMB_COLS, 0, s>>>((W *)dwte, sid, spos, (const A *)dout, N, C);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
}
