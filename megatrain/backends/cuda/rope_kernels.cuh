// rope_kernels.cuh: the HF rotate-half RoPE kernel (device code only), shared by
// cuda_rope.cu (the backend) and lab/rope.cu (which keeps the earlier versions).
// Packed qkv rows (B,T,(NH+2*NKV)*HD): the NQK = NH+NKV q and k heads of each token
// are rotated (DIR 0 forward, 1 the inverse rotation); element p of a head pairs with
// p + HD/2:
//   fwd: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin
//   bwd: dx1 = dy1 cos + dy2 sin, dx2 = dy2 cos - dy1 sin
// Tokens along the grid (t along x, b along y, grid-stride: no index is divided);
// within a token, threadIdx.y walks the heads and threadIdx.x the GPH = HD/2/V groups
// of V pairs (V = 16/sizeof(A) for 128-bit loads of x1, x2 and of the f32 cos/sin
// rows; the host takes V = 1 unless HD/2 is a multiple of V and the buffers aligned).
// Each thread reads both halves before writing them, so in place is safe. The v heads
// are copied by copy_rows_part_kernel (cuda_device.cuh) when out != inp.
#ifndef MT_ROPE_KERNELS_CUH
#define MT_ROPE_KERNELS_CUH

#include "cuda_device.cuh"

template <typename A, int DIR, int V>
__global__ void rope_kernel(A *out, const A *inp, const float *cos_t, const float *sin_t, int B, int T, int NQK,
                            int half, int GPH, size_t stride) {
    for (int b = blockIdx.y; b < B; b += gridDim.y)
        for (int t = blockIdx.x; t < T; t += gridDim.x) {
            const size_t tok = (size_t)b * T + t;
            const float *ct = cos_t + (size_t)t * half, *st = sin_t + (size_t)t * half;
            for (int hh = threadIdx.y; hh < NQK; hh += blockDim.y) {
                const size_t o = tok * stride + (size_t)hh * 2 * half;
                for (int g = threadIdx.x; g < GPH; g += blockDim.x) {
                    const int p = g * V;
                    float x1[V], x2[V], c[V], s[V];
                    mt_ldv<A, V>(x1, inp + o + p);
                    mt_ldv<A, V>(x2, inp + o + half + p);
                    mt_ldv<float, V>(c, ct + p);
                    mt_ldv<float, V>(s, st + p);
#pragma unroll
                    for (int k = 0; k < V; k++) {
                        float y1 = DIR == 0 ? x1[k] * c[k] - x2[k] * s[k] : x1[k] * c[k] + x2[k] * s[k];
                        float y2 = DIR == 0 ? x2[k] * c[k] + x1[k] * s[k] : x2[k] * c[k] - x1[k] * s[k];
                        x1[k] = y1;
                        x2[k] = y2;
                    }
                    mt_stv<A, V>(out + o + p, x1);
                    mt_stv<A, V>(out + o + half + p, x2);
                }
            }
        }
}

// Block shape for GPH groups per head: threads along x cover a head's groups, the rest
// of the 256 along y take further heads.
static inline dim3 rope_block(int GPH) {
    int bx = GPH < 256 ? (GPH > 0 ? GPH : 1) : 256;
    return dim3((unsigned)bx, (unsigned)(256 / bx > 0 ? 256 / bx : 1));
}
static inline dim3 rope_grid(int B, int T) {
    return dim3((unsigned)(T < (1 << 20) ? T : (1 << 20)), (unsigned)(B < 65535 ? B : 65535));
}

#endif
