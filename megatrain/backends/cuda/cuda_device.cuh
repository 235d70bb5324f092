// cuda_device.cuh: the small device helpers every kernel shares (f32/bf16 load and
// store, warp reductions) and the grid size of a grid-stride launch. Dependency-free
// (CUDA headers only: no backend.h, no cuBLAS), so the *_kernels.cuh headers and the
// standalone labs (lab/) include it as well as cuda_internal.h.
#ifndef MT_CUDA_DEVICE_CUH
#define MT_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

typedef __nv_bfloat16 mt_bf16;

__device__ __forceinline__ float mt_ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float mt_ld(const mt_bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void mt_st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void mt_st(mt_bf16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

__device__ __forceinline__ float mt_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float mt_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Grid size for a grid-stride loop over n items with `threads` per block.
static inline unsigned mt_cuda_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    if (b > 65535u * 16u) b = 65535u * 16u; // grid-stride loops cover the rest
    return (unsigned)(b ? b : 1);
}

#endif
