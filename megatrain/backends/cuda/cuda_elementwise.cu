// cuda_elementwise.cu: embedding fwd/bwd, SwiGLU fwd/bwd, residual add, dtype
// cast: the host wrappers, which pick the 128-bit instantiation of each kernel where
// its contract holds (aligned buffers, row lengths a multiple of the vector) and the
// scalar one otherwise. The kernels live in elementwise_kernels.cuh.
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/elementwise_kernels.cuh"

// 1-D launches: the vector groups and the tail share one grid-stride grid.
static unsigned blocks_1d(size_t nv, size_t n, int V) {
    size_t work = nv > (n - nv * V) ? nv : n - nv * V;
    return mt_cuda_blocks(work, 256);
}

// ---- cast (8 elements a thread: 16 bytes of bf16, 32 of f32) ----
mt_status mt_cuda_convert(cudaStream_t s, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    if (n == 0) return MT_OK;
    if (dt == st) {
        if (dst != src) MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * mt_dtype_size(dt), cudaMemcpyDeviceToDevice, s));
        return MT_OK;
    }
    const int vec = mt_cuda_aligned16(dst, src);
    const size_t nv = vec ? n / 8 : 0;
    const unsigned g = blocks_1d(nv, n, vec ? 8 : 1);
    if (dt == MT_BF16) {
        if (vec) convert_kernel<mt_bf16, float, 8><<<g, 256, 0, s>>>((mt_bf16 *)dst, (const float *)src, nv, n);
        else convert_kernel<mt_bf16, float, 1><<<g, 256, 0, s>>>((mt_bf16 *)dst, (const float *)src, 0, n);
    } else {
        if (vec) convert_kernel<float, mt_bf16, 8><<<g, 256, 0, s>>>((float *)dst, (const mt_bf16 *)src, nv, n);
        else convert_kernel<float, mt_bf16, 1><<<g, 256, 0, s>>>((float *)dst, (const mt_bf16 *)src, 0, n);
    }
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

mt_status mt_cuda_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    if ((dt != MT_F32 && dt != MT_BF16) || (st != MT_F32 && st != MT_BF16))
        return mt_fail(MT_ERR_ARG, "cuda cast: bad dtypes %d -> %d", (int)st, (int)dt);
    return mt_cuda_convert(mt_cuda_compute(be), dst, dt, src, st, n);
}

// ---- add ----
mt_status mt_cuda_add(mt_backend *be, void *out, const void *a, const void *b, size_t n) {
    if (n == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch1(be->act_dtype, [&](auto x) -> mt_status {
        using A = decltype(x);
        constexpr int V = mt_vec_of<A>();
        if (mt_cuda_aligned16(out, a, b)) {
            size_t nv = n / V;
            add_kernel<A, V><<<blocks_1d(nv, n, V), 256, 0, s>>>((A *)out, (const A *)a, (const A *)b, nv, n);
        } else {
            add_kernel<A, 1><<<blocks_1d(0, n, 1), 256, 0, s>>>((A *)out, (const A *)a, (const A *)b, 0, n);
        }
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
}

// ---- SwiGLU: gu rows [gate(F) | up(F)], h = silu(gate) * up ----
// 128-bit path when F is a multiple of the vector and the buffers are aligned (then
// every row is: rows are F or 2F elements long).
template <typename A> static int swiglu_vec(int F, const void *a, const void *b, const void *c) {
    return F % mt_vec_of<A>() == 0 && mt_cuda_aligned16(a, b, c);
}

mt_status mt_cuda_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F) {
    if (N < 0 || F < 0) return mt_fail(MT_ERR_SHAPE, "cuda swiglu_fwd: bad shape N=%d F=%d", N, F);
    if (N == 0 || F == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch1(be->act_dtype, [&](auto x) -> mt_status {
        using A = decltype(x);
        constexpr int V = mt_vec_of<A>();
        if (swiglu_vec<A>(F, h, gu, NULL))
            swiglu_fwd_kernel<A, V><<<mt_cuda_rows_grid(N, F / V, 256), 256, 0, s>>>((A *)h, (const A *)gu, N, F, F / V);
        else
            swiglu_fwd_kernel<A, 1><<<mt_cuda_rows_grid(N, F, 256), 256, 0, s>>>((A *)h, (const A *)gu, N, F, F);
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
        constexpr int V = mt_vec_of<A>();
        if (swiglu_vec<A>(F, dgu, dh, gu))
            swiglu_bwd_kernel<A, V><<<mt_cuda_rows_grid(N, F / V, 256), 256, 0, s>>>((A *)dgu, (const A *)dh,
                                                                                    (const A *)gu, N, F, F / V);
        else
            swiglu_bwd_kernel<A, 1>
                <<<mt_cuda_rows_grid(N, F, 256), 256, 0, s>>>((A *)dgu, (const A *)dh, (const A *)gu, N, F, F);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
}

// ---- embedding (the deterministic sorted backward: see elementwise_kernels.cuh) ----
mt_status mt_cuda_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N, int C) {
    if (N < 0 || C <= 0) return mt_fail(MT_ERR_SHAPE, "cuda embedding_fwd: bad shape N=%d C=%d", N, C);
    if (N == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto w) -> mt_status {
        using A = decltype(a);
        using W = decltype(w);
        constexpr int V = mt_vec_of<A>();
        if (C % V == 0 && mt_cuda_aligned16(out, wte)) // rows of both tables start aligned
            embedding_fwd_kernel<A, W, V>
                <<<mt_cuda_rows_grid(N, C / V, 256), 256, 0, s>>>((A *)out, ids, (const W *)wte, N, C, C / V);
        else
            embedding_fwd_kernel<A, W, 1>
                <<<mt_cuda_rows_grid(N, C, 256), 256, 0, s>>>((A *)out, ids, (const W *)wte, N, C, C);
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
    MT_CUDA_CHECK(emb_sort_pairs(NULL, temp_bytes, NULL, NULL, NULL, NULL, N, s));
    size_t vec = mt_cuda_align_up((size_t)N * 4, 256);
    void *scr = NULL;
    MT_TRY(mt_cuda_scratch(be, 3 * vec + mt_cuda_align_up(temp_bytes, 256), &scr));
    int32_t *sid = (int32_t *)scr, *pos = (int32_t *)((char *)scr + vec), *spos = (int32_t *)((char *)scr + 2 * vec);
    void *temp = (char *)scr + 3 * vec;
    iota_kernel<<<mt_cuda_blocks((size_t)N, 256), 256, 0, s>>>(pos, N);
    MT_CUDA_CHECK_LAUNCH();
    MT_CUDA_CHECK(emb_sort_pairs(temp, temp_bytes, ids, sid, pos, spos, N, s)); // stable
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto w) -> mt_status {
        using A = decltype(a);
        using W = decltype(w);
        dim3 grid((unsigned)N, (unsigned)((C + EMB_COLS - 1) / EMB_COLS));
        embedding_bwd_sorted_kernel<A, W><<<grid, EMB_COLS, 0, s>>>((W *)dwte, sid, spos, (const A *)dout, N, C);
        MT_CUDA_CHECK_LAUNCH();
        return MT_OK;
    });
}
