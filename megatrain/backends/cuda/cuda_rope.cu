// cuda_rope.cu: HF rotate-half RoPE on the q and k heads of packed qkv rows
// (B,T,(NH+2*NKV)*HD); v is copied. Element i pairs with i + HD/2:
//   fwd: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin
//   bwd: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin   (the inverse rotation)
// Kernel shape and vector contract: rope_kernels.cuh.
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/rope_kernels.cuh"

template <int DIR>
static mt_status rope(mt_backend *be, void *out, const void *inp, const float *cos_t, const float *sin_t, int B, int T,
                      int NH, int NKV, int HD) {
    if (B < 0 || T <= 0 || NH <= 0 || NKV <= 0 || HD <= 0 || HD % 2)
        return mt_fail(MT_ERR_SHAPE, "cuda rope: bad shape B=%d T=%d NH=%d NKV=%d HD=%d (HD must be even)", B, T, NH, NKV,
                       HD);
    if (B == 0) return MT_OK;
    if ((long long)B * T > 0x7fffffffLL) return mt_fail(MT_ERR_SHAPE, "cuda rope: B*T = %lld tokens", (long long)B * T);
    cudaStream_t s = mt_cuda_compute(be);
    const size_t stride = (size_t)(NH + 2 * NKV) * HD;
    const int NQK = NH + NKV, half = HD / 2;
    return mt_cuda_dispatch1(be->act_dtype, [&](auto a) -> mt_status {
        using A = decltype(a);
        constexpr int V = mt_vec_of<A>();
        dim3 grid = rope_grid(B, T);
        if (half % V == 0 && mt_cuda_aligned16(out, inp, cos_t, sin_t)) // every row and table row aligned too
            rope_kernel<A, DIR, V><<<grid, rope_block(half / V), 0, s>>>((A *)out, (const A *)inp, cos_t, sin_t, B, T,
                                                                         NQK, half, half / V, stride);
        else
            rope_kernel<A, DIR, 1><<<grid, rope_block(half), 0, s>>>((A *)out, (const A *)inp, cos_t, sin_t, B, T, NQK,
                                                                     half, half, stride);
        MT_CUDA_CHECK_LAUNCH();
        if (out != inp) return mt_cuda_copy_v<A>(s, (A *)out, (const A *)inp, B * T, NH, NKV, HD);
        return MT_OK;
    });
}

mt_status mt_cuda_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B, int T,
                           int NH, int NKV, int HD) {
    return rope<0>(be, out, inp, cos, sin, B, T, NH, NKV, HD);
}

mt_status mt_cuda_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B, int T,
                           int NH, int NKV, int HD) {
    return rope<1>(be, dinp, dout, cos, sin, B, T, NH, NKV, HD);
}
