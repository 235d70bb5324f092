// cuda_device.cuh: the small device helpers every kernel shares (f32/bf16 load and
// store, 128-bit vector access, warp reductions) and the launch-shape helpers.
// Dependency-free
// (CUDA headers only: no backend.h, no cuBLAS), so the *_kernels.cuh headers and the
// standalone labs (lab/) include it as well as cuda_internal.h.
#ifndef MT_CUDA_DEVICE_CUH
#define MT_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

// ---- 128-bit access: V consecutive elements of T to/from f32 registers ----
// When V * sizeof(T) is a multiple of 16 the access is V*sizeof(T)/16 int4 loads or
// stores, and p must be 16-byte aligned (the host checks with mt_cuda_aligned16 and
// takes the V = 1 instantiation otherwise); any other V (V = 1: the scalar fallback)
// is element by element. Plain (coherent) loads: several ops write what they read
// (out may alias an input), which the read-only path (ld.global.nc) does not allow.
template <typename T, int V> __device__ __forceinline__ void mt_ldv(float (&f)[V], const T *p) {
    constexpr int BYTES = V * (int)sizeof(T), PER = 16 / (int)sizeof(T);
    if constexpr (BYTES % 16 == 0) {
#pragma unroll
        for (int c = 0; c < BYTES / 16; c++) {
            int4 bits = reinterpret_cast<const int4 *>(p)[c];
            T t[PER];
            memcpy(t, &bits, 16);
#pragma unroll
            for (int k = 0; k < PER; k++) f[c * PER + k] = mt_ld(t, (size_t)k);
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = mt_ld(p, (size_t)k);
    }
}
template <typename T, int V> __device__ __forceinline__ void mt_stv(T *p, const float (&f)[V]) {
    constexpr int BYTES = V * (int)sizeof(T), PER = 16 / (int)sizeof(T);
    if constexpr (BYTES % 16 == 0) {
#pragma unroll
        for (int c = 0; c < BYTES / 16; c++) {
            T t[PER];
#pragma unroll
            for (int k = 0; k < PER; k++) mt_st(t, (size_t)k, f[c * PER + k]);
            int4 bits;
            memcpy(&bits, t, 16);
            reinterpret_cast<int4 *>(p)[c] = bits;
        }
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) mt_st(p, (size_t)k, f[k]);
    }
}
// The value x takes once stored as T (bf16 rounding; identity for f32).
__device__ __forceinline__ float mt_round_as(float x, const float *) { return x; }
__device__ __forceinline__ float mt_round_as(float x, const mt_bf16 *) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

// Elements of T per 16-byte vector: 8 bf16, 4 f32.
template <typename T> constexpr int mt_vec_of() { return 16 / (int)sizeof(T); }

// 1 when every pointer is 16-byte aligned (host side; NULL counts as aligned).
static inline int mt_cuda_aligned16(const void *a, const void *b = NULL, const void *c = NULL, const void *d = NULL) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15u) == 0;
}

// Row-parallel launches: blocks along y cover rows with a grid-stride loop (gridDim.y
// is capped at 65535), along x the columns; no index is ever divided.
static inline dim3 mt_cuda_rows_grid(size_t rows, int cols, int threads) {
    unsigned gx = (unsigned)((cols + threads - 1) / threads);
    if (gx < 1) gx = 1;
    if (gx > 65535u) gx = 65535u;
    unsigned gy = (unsigned)(rows < 1 ? 1 : rows > 65535 ? 65535 : rows);
    return dim3(gx, gy);
}

// Grid size for a grid-stride loop over n items with `threads` per block.
static inline unsigned mt_cuda_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    if (b > 65535u * 16u) b = 65535u * 16u; // grid-stride loops cover the rest
    return (unsigned)(b ? b : 1);
}

#endif
