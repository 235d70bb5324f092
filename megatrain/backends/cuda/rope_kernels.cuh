// rope_kernels.cuh: the HF rotate-half RoPE kernels (device code only), shared by
// cuda_rope.cu (the backend) and lab/rope.cu. Packed qkv rows (B,T,(NH+2*NKV)*HD):
// rope_kernel rotates the NQK = NH+NKV q and k heads (DIR 0 forward, 1 the inverse
// rotation), one thread per (token, head, pair), reading both halves before writing
// (in place is safe); rope_copy_v_kernel copies the v heads when out != inp.
#ifndef MT_ROPE_KERNELS_CUH
#define MT_ROPE_KERNELS_CUH

#include "cuda_device.cuh"

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

#endif
