// cuda_rope.cu: HF rotate-half RoPE on the q and k heads of packed qkv rows
// (B,T,(NH+2*NKV)*HD); v is copied. Element i pairs with i + HD/2:
//   fwd: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin
//   bwd: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin   (the inverse rotation)
// One thread per (token, head, pair); it reads both halves before writing, so in place is safe.
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/rope_kernels.cuh"

template <int DIR>
static mt_status rope(mt_backend *be, void *out, const void *inp, const float *cos_t, const float *sin_t, int B, int T,
                      int NH, int NKV, int HD) {
    if (B < 0 || T <= 0 || NH <= 0 || NKV <= 0 || HD <= 0 || HD % 2)
        return mt_fail(MT_ERR_SHAPE, "cuda rope: bad shape B=%d T=%d NH=%d NKV=%d HD=%d (HD must be even)", B, T, NH, NKV,
                       HD);
    if (B == 0) return MT_OK;
    cudaStream_t s = mt_cuda_compute(be);
    size_t BT = (size_t)B * T, stride = (size_t)(NH + 2 * NKV) * HD;
    int NQK = NH + NKV;
    return mt_cuda_dispatch1(be->act_dtype, [&](auto a) -> mt_status {
        using A = decltype(a);
        size_t total = BT * NQK * (HD / 2);
        rope_kernel<A, DIR><<<mt_cuda_blocks(total, 256), 256, 0, s>>>((A *)out, (const A *)inp, cos_t, sin_t, BT, T, NQK,
                                                                       HD, stride);
        MT_CUDA_CHECK_LAUNCH();
        if (out != inp) {
            size_t tv = BT * NKV * HD;
            rope_copy_v_kernel<A><<<mt_cuda_blocks(tv, 256), 256, 0, s>>>((A *)out, (const A *)inp, BT, NQK * HD,
                                                                          NKV * HD, stride);
            MT_CUDA_CHECK_LAUNCH();
        }
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
