// xent_kernels.cuh: the fused softmax cross-entropy kernel (device code only), shared
// by cuda_xent.cu (the backend) and lab/xent.cu (which keeps the earlier versions). One
// block of XENT_THREADS per row of V logits, in place, 128-bit accesses where V allows:
// pass 1 an online (max, sum) in f32 (each thread its strided slice, then a warp and a
// block merge), pass 2 writes dscale * (softmax - onehot).
// A target outside [0,V) gets loss 0 and a zero gradient row.
#ifndef MT_XENT_KERNELS_CUH
#define MT_XENT_KERNELS_CUH

#include <math.h>

#include "cuda_device.cuh"

static const int XENT_THREADS = 512;

__device__ __forceinline__ void online_merge(float &m, float &s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) {
        m = m2;
        s = s2;
        return;
    }
    float mn = fmaxf(m, m2);
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

// VEC logits a thread per access: 16/sizeof(A) (128-bit) when V is a multiple of it and
// the buffer is aligned (then every row is), else 1.
template <typename A, int VEC>
__global__ void __launch_bounds__(XENT_THREADS) xent_kernel(A *logits, float *losses, const int32_t *targets, int V,
                                                            float dscale) {
    __shared__ float sm[32], ss[32];
    __shared__ float row_lse;
    size_t row = blockIdx.x;
    A *x = logits + row * (size_t)V;
    const int nv = V / VEC;
    float m = -INFINITY, s = 0.f;
    for (int j = threadIdx.x; j < nv; j += blockDim.x) {
        float f[VEC];
        mt_ldv<A, VEC>(f, x + (size_t)j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            float xv = f[k];
            if (xv > m) {
                s = (m == -INFINITY ? 0.f : s * expf(m - xv)) + 1.f;
                m = xv;
            } else if (xv != -INFINITY) { // (-inf) - (-inf) would be NaN
                s += expf(xv - m);
            }
        }
    }
    // warp merge, then across warps
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        online_merge(m, s, m2, s2);
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nw ? sm[lane] : -INFINITY;
        s = lane < nw ? ss[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            online_merge(m, s, m2, s2);
        }
        if (lane == 0) row_lse = m + logf(s);
    }
    __syncthreads();
    float lse = row_lse;
    int tgt = targets[row];
    bool valid = tgt >= 0 && tgt < V;
    if (threadIdx.x == 0) losses[row] = valid ? lse - mt_ld(x, (size_t)tgt) : 0.f;
    __syncthreads(); // the loss reads x[tgt] before any thread overwrites it
    for (int j = threadIdx.x; j < nv; j += blockDim.x) {
        float f[VEC];
        mt_ldv<A, VEC>(f, x + (size_t)j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            float p = valid ? expf(f[k] - lse) : 0.f;
            f[k] = dscale * (p - (j * VEC + k == tgt ? 1.f : 0.f));
        }
        mt_stv<A, VEC>(x + (size_t)j * VEC, f);
    }
}

#endif
