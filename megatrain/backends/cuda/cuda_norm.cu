// cuda_norm.cu: RMSNorm and the per-head q/k RMSNorm of packed qkv, forward and
// backward, and the fused residual forms (add_rmsnorm_fwd: sum = a + b, out =
// rmsnorm(sum); rmsnorm_bwd_add: dacc += rmsnorm_bwd): the host wrappers. The
// kernels and the "row map" that lets both ops share them live in norm_kernels.cuh.
// One warp per row (f32 math, 128-bit accesses where the shapes allow); the weight
// gradient is a deterministic two-stage column reduction (row-chunk partials in
// scratch, then a fixed-order sum).
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/norm_kernels.cuh"

// 128-bit accesses when the row length and token stride are multiples of the vector
// and every pointer is aligned (then every row base is); else the scalar instantiation.
template <typename A> static int norm_vec(row_map m, int D, const void *a, const void *b, const void *c, const void *d) {
    const int V = mt_vec_of<A>();
    return D % V == 0 && m.tok_stride % V == 0 && mt_cuda_aligned16(a, b, c, d);
}

// out = rmsnorm(inp [+ res, stored to sum]) for one row group.
template <typename A, typename W, bool RES>
static mt_status norm_fwd_group(cudaStream_t s, A *out, float *rstd, A *sum, const A *inp, const A *res, const W *w,
                                row_map m, size_t R, int D, float eps) {
    if (R == 0) return MT_OK;
    size_t blocks = (R + NORM_WARPS - 1) / NORM_WARPS;
    if (blocks > 0x7fffffffu) return mt_fail(MT_ERR_SHAPE, "cuda rmsnorm: %zu rows is too many", R);
    constexpr int V = mt_vec_of<A>();
    if (norm_vec<A>(m, D, out, inp, w, RES ? (const void *)sum : NULL) && mt_cuda_aligned16(res))
        rmsnorm_fwd_kernel<A, W, V, RES>
            <<<(unsigned)blocks, NORM_WARPS * 32, 0, s>>>(out, rstd, sum, inp, res, w, m, R, D, eps);
    else
        rmsnorm_fwd_kernel<A, W, 1, RES>
            <<<(unsigned)blocks, NORM_WARPS * 32, 0, s>>>(out, rstd, sum, inp, res, w, m, R, D, eps);
    MT_CUDA_CHECK_LAUNCH();
    return MT_OK;
}

// dw (overwritten) then dx for one row group; dw first so that dinp may alias dout.
// ACC: dinp += dx (the fused residual-gradient add).
template <typename A, typename W, bool ACC>
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
        constexpr int V = mt_vec_of<A>();
        if (norm_vec<A>(m, D, dinp, dout, inp, w))
            rmsnorm_bwd_dx_kernel<A, W, V, ACC>
                <<<(unsigned)blocks, NORM_WARPS * 32, 0, s>>>(dinp, dout, inp, w, rstd, m, R, D);
        else
            rmsnorm_bwd_dx_kernel<A, W, 1, ACC>
                <<<(unsigned)blocks, NORM_WARPS * 32, 0, s>>>(dinp, dout, inp, w, rstd, m, R, D);
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
        return norm_fwd_group<A, W, false>(s, (A *)out, rstd, NULL, (const A *)inp, NULL, (const W *)w, m, (size_t)R,
                                           D, eps);
    });
}

mt_status mt_cuda_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                  const void *w, mt_dtype wdt, int R, int D, float eps) {
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cuda add_rmsnorm_fwd: bad shape R=%d D=%d", R, D);
    cudaStream_t s = mt_cuda_compute(be);
    row_map m = {1, 0, 1, (size_t)D};
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto x, auto ww) -> mt_status {
        using A = decltype(x);
        using W = decltype(ww);
        return norm_fwd_group<A, W, true>(s, (A *)out, rstd, (A *)sum, (const A *)a, (const A *)b, (const W *)w, m,
                                          (size_t)R, D, eps);
    });
}

mt_status mt_cuda_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                              const float *rstd, mt_dtype wdt, int R, int D) {
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cuda rmsnorm_bwd: bad shape R=%d D=%d", R, D);
    row_map m = {1, 0, 1, (size_t)D};
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto ww) -> mt_status {
        using A = decltype(a);
        using W = decltype(ww);
        return norm_bwd_group<A, W, false>(be, (A *)dinp, (W *)dw, (const A *)dout, (const A *)inp, (const W *)w, rstd,
                                           m, (size_t)R, D);
    });
}

mt_status mt_cuda_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                  const void *w, const float *rstd, mt_dtype wdt, int R, int D) {
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cuda rmsnorm_bwd_add: bad shape R=%d D=%d", R, D);
    if (dacc == dout || dacc == inp)
        return mt_fail(MT_ERR_ARG, "cuda rmsnorm_bwd_add: the accumulated gradient may not alias dout or inp");
    row_map m = {1, 0, 1, (size_t)D};
    return mt_cuda_dispatch2(be->act_dtype, wdt, [&](auto a, auto ww) -> mt_status {
        using A = decltype(a);
        using W = decltype(ww);
        return norm_bwd_group<A, W, true>(be, (A *)dacc, (W *)dw, (const A *)dout, (const A *)inp, (const W *)w, rstd,
                                          m, (size_t)R, D);
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
        MT_TRY((norm_fwd_group<A, W, false>(s, (A *)out, rstd, NULL, (const A *)inp, NULL, (const W *)qw, mq,
                                            (size_t)N * NH, HD, eps)));
        MT_TRY((norm_fwd_group<A, W, false>(s, (A *)out, rstd, NULL, (const A *)inp, NULL, (const W *)kw, mk,
                                            (size_t)N * NKV, HD, eps)));
        if (out != inp) return mt_cuda_copy_v<A>(s, (A *)out, (const A *)inp, N, NH, NKV, HD);
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
        MT_TRY((norm_bwd_group<A, W, false>(be, (A *)dinp, (W *)dqw, (const A *)dout, (const A *)inp, (const W *)qw,
                                            rstd, mq, (size_t)N * NH, HD)));
        MT_TRY((norm_bwd_group<A, W, false>(be, (A *)dinp, (W *)dkw, (const A *)dout, (const A *)inp, (const W *)kw,
                                            rstd, mk, (size_t)N * NKV, HD)));
        if (dinp && dinp != dout && N > 0) return mt_cuda_copy_v<A>(s, (A *)dinp, (const A *)dout, N, NH, NKV, HD);
        return MT_OK;
    });
}
