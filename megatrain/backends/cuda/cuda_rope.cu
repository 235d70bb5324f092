// cuda_rope.cu: HF rotate-half RoPE on the q and k heads of packed qkv rows
// (B,T,(NH+2*NKV)*HD); v is copied. Element i pairs with i + HD/2:
//   fwd: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin
//   bwd: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin   (the inverse rotation)
// One thread per (token, head, pair); it reads both halves before writing, so in place is safe.
#include "backends/cuda/cuda_internal.h"

template <typename A, int DIR>
__global__ void rope_kernel(A *out, const A *inp, const float *cos_t, const float *sin_t, size_t BT, int T, int NQK,
                            int HD, size_t stride) {
    int half = HD / 2;
    size_t total = BT * (size_t)NQK * half;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int p = (int)(i % (size_t)half);
        size_t th = i / (size_t)half;
        int hh = (int)(th % (size_t)NQK);
        size_t tok = th / (size_t)NQK;
        int t = (int)(tok % (size_t)T);
        size_t o = tok * stride + (size_t)hh * HD + p;
        float c = cos_t[(size_t)t * half + p], s = sin_t[(size_t)t * half + p];
        float x1 = mt_ld(inp, o), x2 = mt_ld(inp, o + half);
        if (DIR == 0) {
            mt_st(out, o, x1 * c - x2 * s);
            mt_st(out, o + half, x2 * c + x1 * s);
        } else {
            mt_st(out, o, x1 * c + x2 * s);
            mt_st(out, o + half, x2 * c - x1 * s);
        }
    }
}

template <typename A> __global__ void rope_copy_v_kernel(A *dst, const A *src, size_t BT, int off, int per, size_t stride) {
    size_t total = BT * (size_t)per;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t j = (i / per) * stride + off + i % per;
        dst[j] = src[j];
    }
}

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
