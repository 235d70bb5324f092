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
// Two floats as two bf16 in one 32-bit word (lo in the low half), or one float's bits.
__device__ __forceinline__ uint32_t mt_pack_word(const float *f, const mt_bf16 *) {
    __nv_bfloat162 v = __floats2bfloat162_rn(f[0], f[1]);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}
__device__ __forceinline__ uint32_t mt_pack_word(const float *f, const float *) { return __float_as_uint(f[0]); }

template <typename T, int V> __device__ __forceinline__ void mt_stv(T *p, const float (&f)[V]) {
    constexpr int BYTES = V * (int)sizeof(T), PER = 16 / (int)sizeof(T), EPW = 4 / (int)sizeof(T);
    if constexpr (BYTES % 16 == 0) {
        // Built from 32-bit words and stored with __stwb (st.global.wb.v4, default caching):
        // a plain int4 store was split into 32- or 16-bit stores in some kernels.
#pragma unroll
        for (int c = 0; c < BYTES / 16; c++) {
            uint32_t w[4];
#pragma unroll
            for (int q = 0; q < 4; q++) w[q] = mt_pack_word(f + c * PER + q * EPW, (const T *)nullptr);
            __stwb(reinterpret_cast<uint4 *>(p) + c, make_uint4(w[0], w[1], w[2], w[3]));
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

// Copies `per` = PV * V elements at offset `off` of each of N rows `stride` apart: the
// v part of packed qkv rows (per = NKV*HD at (NH+NKV)*HD), which q/k-norm and RoPE pass
// through; V elements a thread (per, off, stride multiples of V and the pointers
// aligned when V > 1). Rows along grid.y, grid-stride (see mt_cuda_rows_grid).
template <typename A, int V>
__global__ void copy_rows_part_kernel(A *dst, const A *src, int N, size_t stride, size_t off, int PV) {
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        size_t row = (size_t)n * stride + off;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < PV; c += gridDim.x * blockDim.x) {
            float f[V];
            mt_ldv<A, V>(f, src + row + (size_t)c * V);
            mt_stv<A, V>(dst + row + (size_t)c * V, f);
        }
    }
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
