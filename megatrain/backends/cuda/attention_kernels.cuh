// attention_kernels.cuh: causal GQA flash attention kernels (device code only),
// shared by cuda_attention.cu (the backend) and lab/attention.cu.
//
// Layout: packed qkv rows (B,T,(NH+2*NKV)*HD) = [q NH*HD | k NKV*HD | v NKV*HD]
// per token; q head h reads kv head h / (NH/NKV) (HF repeat_kv); out (B,T,NH*HD);
// lse (B,NH,T) natural-log logsumexp of the scaled scores. No T x T matrix.
//
// Two families:
//  * "simple" (any activation type, f32 math, HD <= 256): one warp per query row
//    (fwd, dq) or per key row (dk/dv), K/V (or Q/dO) tiles of 32 rows in shared
//    memory. The fp32 path and the fallback for odd head sizes.
//  * "mma" (bf16, HD in {32,64,96,128}): FlashAttention-2 style with
//    mma.sync.m16n8k16 bf16 -> f32 tensor-core ops; 4 warps x 16 rows. The S
//    accumulators are reused in registers as the A operand of the next product
//    (C-fragment layout == A-fragment layout of m16n8k16, PTX ISA 9.7.13.5.8).
// Backward, both families: D = rowsum(dO*O) precomputed; dq by a kernel that owns
// query rows; dk/dv by a kernel that owns key rows and loops over the group's q
// heads. No atomics: deterministic, at the price of computing S twice.
#ifndef MT_ATTENTION_KERNELS_CUH
#define MT_ATTENTION_KERNELS_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "cuda_device.cuh" // mt_bf16, mt_ld/mt_st, mt_warp_sum/max


typedef struct {
    int B, T, NH, NKV, HD;
    int rep;           // NH / NKV
    size_t qkv_stride; // (NH + 2*NKV) * HD elements per token
    size_t o_stride;   // NH * HD
    float scale;       // 1/sqrt(HD)
} attn_params;

__device__ __forceinline__ size_t attn_q_off(const attn_params &p, int b, int t, int h) {
    return ((size_t)b * p.T + t) * p.qkv_stride + (size_t)h * p.HD;
}
__device__ __forceinline__ size_t attn_k_off(const attn_params &p, int b, int t, int kvh) {
    return ((size_t)b * p.T + t) * p.qkv_stride + (size_t)(p.NH + kvh) * p.HD;
}
__device__ __forceinline__ size_t attn_v_off(const attn_params &p, int b, int t, int kvh) {
    return ((size_t)b * p.T + t) * p.qkv_stride + (size_t)(p.NH + p.NKV + kvh) * p.HD;
}
__device__ __forceinline__ size_t attn_o_off(const attn_params &p, int b, int t, int h) {
    return ((size_t)b * p.T + t) * p.o_stride + (size_t)h * p.HD;
}
__device__ __forceinline__ size_t attn_lse_off(const attn_params &p, int b, int h, int t) {
    return ((size_t)b * p.NH + h) * p.T + t;
}

// ---------------------------------------------------------------------------
// D[b,h,t] = sum_d dO[b,t,h,d] * O[b,t,h,d]   (one warp per (token, head))
template <typename A>
__global__ void attn_bwd_dot_kernel(float *Dst, const A *dout, const A *out, attn_params p) {
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    size_t rows = (size_t)p.B * p.T * p.NH;
    if (row >= rows) return;
    int h = (int)(row % p.NH);
    size_t tok = row / p.NH;
    int t = (int)(tok % p.T), b = (int)(tok / p.T);
    size_t o = attn_o_off(p, b, t, h);
    float acc = 0.f;
    for (int d = lane; d < p.HD; d += 32) acc += mt_ld(dout, o + d) * mt_ld(out, o + d);
    acc = mt_warp_sum(acc);
    if (lane == 0) Dst[attn_lse_off(p, b, h, t)] = acc;
}

// ---------------------------------------------------------------------------
// Simple family. NC = ceil(HD/32): lane owns dims d = lane + 32*c, c < NC.
#define ATTN_SW 8  // warps (rows) per block
#define ATTN_ST 32 // tile rows

// smem: Qs[SW][HD] | Ks[ST][HD+1] | Vs[ST][HD]  (f32)
static inline size_t attn_simple_fwd_smem(int HD) {
    return sizeof(float) * ((size_t)ATTN_SW * HD + (size_t)ATTN_ST * (HD + 1) + (size_t)ATTN_ST * HD);
}

template <typename A, int NC>
__global__ void __launch_bounds__(ATTN_SW * 32) attn_fwd_simple_kernel(A *out, float *lse, const A *qkv, attn_params p) {
    extern __shared__ float smem[];
    const int HD = p.HD, KLD = HD + 1;
    float *Qs = smem, *Ks = Qs + ATTN_SW * HD, *Vs = Ks + ATTN_ST * KLD;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / p.rep;
    int q0 = (gridDim.x - 1 - blockIdx.x) * ATTN_SW; // longest rows first
    int i = q0 + warp;
    bool row_ok = i < p.T;
    for (int d = lane; d < HD; d += 32) Qs[warp * HD + d] = row_ok ? mt_ld(qkv, attn_q_off(p, b, i, h) + d) : 0.f;
    float o[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) o[c] = 0.f;
    float m = -INFINITY, l = 0.f;
    int kend = min(p.T, q0 + ATTN_SW); // keys [0, kend) are visible to some row of the block
    for (int kt = 0; kt < kend; kt += ATTN_ST) {
        __syncthreads(); // previous tile fully consumed (and Qs written on the first pass)
        for (int idx = threadIdx.x; idx < ATTN_ST * HD; idx += blockDim.x) {
            int r = idx / HD, d = idx % HD, key = kt + r;
            bool ok = key < p.T;
            Ks[r * KLD + d] = ok ? mt_ld(qkv, attn_k_off(p, b, key, kvh) + d) : 0.f;
            Vs[r * HD + d] = ok ? mt_ld(qkv, attn_v_off(p, b, key, kvh) + d) : 0.f;
        }
        __syncthreads();
        if (!row_ok || kt > i) continue; // warp-uniform; no barrier below
        int j = kt + lane;
        float s = -INFINITY;
        if (j <= i) {
            float acc = 0.f;
            const float *q = Qs + warp * HD, *k = Ks + lane * KLD;
            for (int d = 0; d < HD; d++) acc += q[d] * k[d];
            s = acc * p.scale;
        }
        float m_new = fmaxf(m, mt_warp_max(s)); // finite: key kt <= i is in this tile
        float pj = j <= i ? __expf(s - m_new) : 0.f;
        float alpha = __expf(m - m_new); // m = -inf on the first tile -> 0
        l = l * alpha + mt_warp_sum(pj);
#pragma unroll
        for (int c = 0; c < NC; c++) o[c] *= alpha;
        int jn = min(ATTN_ST, i - kt + 1);
        for (int jj = 0; jj < jn; jj++) {
            float pv = __shfl_sync(0xffffffffu, pj, jj);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int d = lane + 32 * c;
                if (d < HD) o[c] += pv * Vs[jj * HD + d];
            }
        }
        m = m_new;
    }
    if (!row_ok) return;
    float inv = 1.f / l;
    size_t oo = attn_o_off(p, b, i, h);
#pragma unroll
    for (int c = 0; c < NC; c++) {
        int d = lane + 32 * c;
        if (d < HD) mt_st(out, oo + d, o[c] * inv);
    }
    if (lane == 0) lse[attn_lse_off(p, b, h, i)] = m + __logf(l);
}

// smem: Qs[SW][HD] | dOs[SW][HD] | Ks[ST][HD+1] | Vs[ST][HD+1]
static inline size_t attn_simple_dq_smem(int HD) {
    return sizeof(float) * (2 * (size_t)ATTN_SW * HD + 2 * (size_t)ATTN_ST * (HD + 1));
}

// dq_i = scale * sum_j P_ij (dP_ij - D_i) k_j, dP_ij = dO_i . v_j; one warp per query row.
template <typename A, int NC>
__global__ void __launch_bounds__(ATTN_SW * 32)
    attn_dq_simple_kernel(A *dqkv, const A *dout, const A *qkv, const float *lse, const float *Dd, attn_params p) {
    extern __shared__ float smem[];
    const int HD = p.HD, KLD = HD + 1;
    float *Qs = smem, *dOs = Qs + ATTN_SW * HD, *Ks = dOs + ATTN_SW * HD, *Vs = Ks + ATTN_ST * KLD;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / p.rep;
    int q0 = (gridDim.x - 1 - blockIdx.x) * ATTN_SW;
    int i = q0 + warp;
    bool row_ok = i < p.T;
    for (int d = lane; d < HD; d += 32) {
        Qs[warp * HD + d] = row_ok ? mt_ld(qkv, attn_q_off(p, b, i, h) + d) : 0.f;
        dOs[warp * HD + d] = row_ok ? mt_ld(dout, attn_o_off(p, b, i, h) + d) : 0.f;
    }
    float lse_i = row_ok ? lse[attn_lse_off(p, b, h, i)] : 0.f;
    float D_i = row_ok ? Dd[attn_lse_off(p, b, h, i)] : 0.f;
    float dq[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) dq[c] = 0.f;
    int kend = min(p.T, q0 + ATTN_SW);
    for (int kt = 0; kt < kend; kt += ATTN_ST) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < ATTN_ST * HD; idx += blockDim.x) {
            int r = idx / HD, d = idx % HD, key = kt + r;
            bool ok = key < p.T;
            Ks[r * KLD + d] = ok ? mt_ld(qkv, attn_k_off(p, b, key, kvh) + d) : 0.f;
            Vs[r * KLD + d] = ok ? mt_ld(qkv, attn_v_off(p, b, key, kvh) + d) : 0.f;
        }
        __syncthreads();
        if (!row_ok || kt > i) continue;
        int j = kt + lane;
        float ds = 0.f;
        if (j <= i) {
            float s = 0.f, dp = 0.f;
            const float *q = Qs + warp * HD, *g = dOs + warp * HD, *k = Ks + lane * KLD, *v = Vs + lane * KLD;
            for (int d = 0; d < HD; d++) {
                s += q[d] * k[d];
                dp += g[d] * v[d];
            }
            float pij = __expf(s * p.scale - lse_i);
            ds = pij * (dp - D_i);
        }
        int jn = min(ATTN_ST, i - kt + 1);
        for (int jj = 0; jj < jn; jj++) {
            float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                int d = lane + 32 * c;
                if (d < HD) dq[c] += dsj * Ks[jj * KLD + d];
            }
        }
    }
    if (!row_ok) return;
    size_t qo = attn_q_off(p, b, i, h);
#pragma unroll
    for (int c = 0; c < NC; c++) {
        int d = lane + 32 * c;
        if (d < HD) mt_st(dqkv, qo + d, dq[c] * p.scale);
    }
}

// smem: Ks[SW][HD] | Vs[SW][HD] | Qs[ST][HD+1] | dOs[ST][HD+1] | lse[ST] | D[ST]
static inline size_t attn_simple_dkv_smem(int HD) {
    return sizeof(float) * (2 * (size_t)ATTN_SW * HD + 2 * (size_t)ATTN_ST * (HD + 1) + 2 * ATTN_ST);
}

// dv_j = sum_{h in group, i >= j} P_ij dO_i;  dk_j = scale * sum dS_ij q_i. One warp per key row.
template <typename A, int NC>
__global__ void __launch_bounds__(ATTN_SW * 32)
    attn_dkv_simple_kernel(A *dqkv, const A *dout, const A *qkv, const float *lse, const float *Dd, attn_params p) {
    extern __shared__ float smem[];
    const int HD = p.HD, QLD = HD + 1;
    float *Ks = smem, *Vs = Ks + ATTN_SW * HD, *Qs = Vs + ATTN_SW * HD, *dOs = Qs + ATTN_ST * QLD;
    float *lse_s = dOs + ATTN_ST * QLD, *D_s = lse_s + ATTN_ST;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int kvh = blockIdx.y, b = blockIdx.z;
    int k0 = blockIdx.x * ATTN_SW;
    int j = k0 + warp;
    bool key_ok = j < p.T;
    for (int d = lane; d < HD; d += 32) {
        Ks[warp * HD + d] = key_ok ? mt_ld(qkv, attn_k_off(p, b, j, kvh) + d) : 0.f;
        Vs[warp * HD + d] = key_ok ? mt_ld(qkv, attn_v_off(p, b, j, kvh) + d) : 0.f;
    }
    float dk[NC], dv[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) dk[c] = dv[c] = 0.f;
    for (int hr = 0; hr < p.rep; hr++) {
        int h = kvh * p.rep + hr;
        for (int it = k0; it < p.T; it += ATTN_ST) {
            __syncthreads();
            for (int idx = threadIdx.x; idx < ATTN_ST * HD; idx += blockDim.x) {
                int r = idx / HD, d = idx % HD, q = it + r;
                bool ok = q < p.T;
                Qs[r * QLD + d] = ok ? mt_ld(qkv, attn_q_off(p, b, q, h) + d) : 0.f;
                dOs[r * QLD + d] = ok ? mt_ld(dout, attn_o_off(p, b, q, h) + d) : 0.f;
            }
            if (threadIdx.x < ATTN_ST) {
                int q = it + threadIdx.x;
                lse_s[threadIdx.x] = q < p.T ? lse[attn_lse_off(p, b, h, q)] : 0.f;
                D_s[threadIdx.x] = q < p.T ? Dd[attn_lse_off(p, b, h, q)] : 0.f;
            }
            __syncthreads();
            if (!key_ok || it + ATTN_ST - 1 < j) continue; // warp-uniform
            int i = it + lane;
            float pij = 0.f, ds = 0.f;
            if (i >= j && i < p.T) {
                float s = 0.f, dp = 0.f;
                const float *q = Qs + lane * QLD, *g = dOs + lane * QLD, *k = Ks + warp * HD, *v = Vs + warp * HD;
                for (int d = 0; d < HD; d++) {
                    s += q[d] * k[d];
                    dp += g[d] * v[d];
                }
                pij = __expf(s * p.scale - lse_s[lane]);
                ds = pij * (dp - D_s[lane]);
            }
            int ilo = max(0, j - it), ihi = min(ATTN_ST, p.T - it);
            for (int ii = ilo; ii < ihi; ii++) {
                float pi = __shfl_sync(0xffffffffu, pij, ii), dsi = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
                for (int c = 0; c < NC; c++) {
                    int d = lane + 32 * c;
                    if (d < HD) {
                        dv[c] += pi * dOs[ii * QLD + d];
                        dk[c] += dsi * Qs[ii * QLD + d];
                    }
                }
            }
        }
    }
    if (!key_ok) return;
    size_t ko = attn_k_off(p, b, j, kvh), vo = attn_v_off(p, b, j, kvh);
#pragma unroll
    for (int c = 0; c < NC; c++) {
        int d = lane + 32 * c;
        if (d < HD) {
            mt_st(dqkv, ko + d, dk[c] * p.scale);
            mt_st(dqkv, vo + d, dv[c]);
        }
    }
}

// ---------------------------------------------------------------------------
// mma family (bf16). 4 warps; each warp owns 16 rows of a 64-row tile.
// Fragment layouts of mma.m16n8k16 (g = lane/4, t = lane%4), each u32 = 2 bf16,
// lower column/k index in the low half:
//   A (16x16, row-major): a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B (16x8, "col"):      b0 (k 2t..2t+1, n g)  b1 (k 2t+8.., n g)
//   C (16x8, f32):        c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1)
#define ATTN_MW 4   // warps
#define ATTN_MQ 64  // query rows per block (fwd, dq)
#define ATTN_MK 64  // key rows per tile (fwd, dq) / per block (dkv)
#define ATTN_MQ2 32 // query rows per tile in dkv
#define ATTN_LOG2E 1.4426950408889634f

__device__ __forceinline__ void attn_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t attn_pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); // .x = lo -> low 16 bits
    return *reinterpret_cast<uint32_t *>(&v);
}
__device__ __forceinline__ uint32_t attn_ld32(const mt_bf16 *s) { return *reinterpret_cast<const uint32_t *>(s); }
// Two bf16 from consecutive rows (same column): a B fragment read "down" a row-major tile.
__device__ __forceinline__ uint32_t attn_ld2rows(const mt_bf16 *s, int ld) {
    uint32_t lo = *reinterpret_cast<const unsigned short *>(s);
    uint32_t hi = *reinterpret_cast<const unsigned short *>(s + ld);
    return lo | (hi << 16);
}
// A fragment of rows r0..r0+15, k columns k0..k0+15 of a row-major smem tile.
__device__ __forceinline__ void attn_ld_a(uint32_t a[4], const mt_bf16 *s, int ld, int r0, int k0, int lane) {
    int g = lane >> 2, t = lane & 3;
    a[0] = attn_ld32(s + (r0 + g) * ld + k0 + 2 * t);
    a[1] = attn_ld32(s + (r0 + g + 8) * ld + k0 + 2 * t);
    a[2] = attn_ld32(s + (r0 + g) * ld + k0 + 8 + 2 * t);
    a[3] = attn_ld32(s + (r0 + g + 8) * ld + k0 + 8 + 2 * t);
}

// Copies rows [r_begin, r_begin+nrows) of one head (HD bf16 each, `stride` apart in
// global memory, starting at base_off) into a smem tile with row pitch ld; rows
// >= T are zero (their products must not turn into NaN). 16-byte vectors.
template <int HD>
__device__ __forceinline__ void attn_load_tile(mt_bf16 *dst, int ld, const mt_bf16 *src, size_t base_off,
                                               size_t stride, int r_begin, int nrows, int T) {
    constexpr int VPR = HD / 8; // 16-byte vectors per row
    for (int idx = threadIdx.x; idx < nrows * VPR; idx += blockDim.x) {
        int r = idx / VPR, v = idx % VPR, row = r_begin + r;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (row < T) val = *reinterpret_cast<const uint4 *>(src + base_off + (size_t)row * stride + v * 8);
        *reinterpret_cast<uint4 *>(dst + r * ld + v * 8) = val;
    }
}

template <int HD> static inline size_t attn_mma_fwd_smem() {
    return sizeof(mt_bf16) * (size_t)(ATTN_MQ + 2 * ATTN_MK) * (HD + 8);
}

template <int HD>
__global__ void __launch_bounds__(ATTN_MW * 32)
    attn_fwd_mma_kernel(mt_bf16 *out, float *lse, const mt_bf16 *qkv, attn_params p) {
    constexpr int LD = HD + 8, KS = HD / 16, DT = HD / 8, NT = ATTN_MK / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    mt_bf16 *Qs = reinterpret_cast<mt_bf16 *>(smem_raw), *Ks = Qs + ATTN_MQ * LD, *Vs = Ks + ATTN_MK * LD;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / p.rep;
    int q0 = (gridDim.x - 1 - blockIdx.x) * ATTN_MQ;
    size_t tok0 = (size_t)b * p.T;
    attn_load_tile<HD>(Qs, LD, qkv, tok0 * p.qkv_stride + (size_t)h * HD, p.qkv_stride, q0, ATTN_MQ, p.T);
    int row0 = q0 + warp * 16 + g, row1 = row0 + 8; // this thread's two query rows
    float o[DT][4];
#pragma unroll
    for (int i = 0; i < DT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    const float sl2 = p.scale * ATTN_LOG2E;
    int kend = min(p.T, q0 + ATTN_MQ);
    size_t koff = tok0 * p.qkv_stride + (size_t)(p.NH + kvh) * HD;
    size_t voff = tok0 * p.qkv_stride + (size_t)(p.NH + p.NKV + kvh) * HD;
    for (int kt = 0; kt < kend; kt += ATTN_MK) {
        __syncthreads();
        attn_load_tile<HD>(Ks, LD, qkv, koff, p.qkv_stride, kt, ATTN_MK, p.T);
        attn_load_tile<HD>(Vs, LD, qkv, voff, p.qkv_stride, kt, ATTN_MK, p.T);
        __syncthreads();
        if (kt > q0 + warp * 16 + 15) continue; // whole warp above the diagonal; warp-uniform
        float s[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t a[4];
            attn_ld_a(a, Qs, LD, warp * 16, kk * 16, lane);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const mt_bf16 *kr = Ks + (n * 8 + g) * LD + kk * 16 + 2 * t;
                attn_mma(s[n], a, attn_ld32(kr), attn_ld32(kr + 8));
            }
        }
        // mask, scale into log2 units, row max over this tile
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = kt + n * 8 + 2 * t + (e & 1);
                int row = e < 2 ? row0 : row1;
                float v = (key <= row && row < p.T) ? s[n][e] * sl2 : -INFINITY;
                s[n][e] = v;
                if (e < 2) mx0 = fmaxf(mx0, v);
                else mx1 = fmaxf(mx1, v);
            }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        // fully masked rows so far (padding rows): use 0 as the reference so no inf - inf
        float mu0 = mn0 == -INFINITY ? 0.f : mn0, mu1 = mn1 == -INFINITY ? 0.f : mn1;
        float al0 = exp2f(m0 - mu0), al1 = exp2f(m1 - mu1);
        m0 = mn0;
        m1 = mn1;
        float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            s[n][0] = exp2f(s[n][0] - mu0);
            s[n][1] = exp2f(s[n][1] - mu0);
            s[n][2] = exp2f(s[n][2] - mu1);
            s[n][3] = exp2f(s[n][3] - mu1);
            rs0 += s[n][0] + s[n][1];
            rs1 += s[n][2] + s[n][3];
        }
        l0 = l0 * al0 + rs0; // per-thread partial row sums; the 4 threads of a row merge at the end
        l1 = l1 * al1 + rs1;
#pragma unroll
        for (int i = 0; i < DT; i++) {
            o[i][0] *= al0;
            o[i][1] *= al0;
            o[i][2] *= al1;
            o[i][3] *= al1;
        }
        // O += P V: P's C fragments become A fragments (keys are the k dimension)
#pragma unroll
        for (int kk = 0; kk < ATTN_MK / 16; kk++) {
            uint32_t a[4];
            a[0] = attn_pack(s[2 * kk][0], s[2 * kk][1]);
            a[1] = attn_pack(s[2 * kk][2], s[2 * kk][3]);
            a[2] = attn_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            a[3] = attn_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
            const mt_bf16 *vr = Vs + (kk * 16 + 2 * t) * LD + g;
#pragma unroll
            for (int i = 0; i < DT; i++)
                attn_mma(o[i], a, attn_ld2rows(vr + i * 8, LD), attn_ld2rows(vr + 8 * LD + i * 8, LD));
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float LN2 = 0.6931471805599453f;
    if (row0 < p.T) {
        float inv = 1.f / l0;
        mt_bf16 *orow = out + attn_o_off(p, b, row0, h) + 2 * t;
#pragma unroll
        for (int i = 0; i < DT; i++)
            *reinterpret_cast<uint32_t *>(orow + i * 8) = attn_pack(o[i][0] * inv, o[i][1] * inv);
        if (t == 0) lse[attn_lse_off(p, b, h, row0)] = (m0 + __log2f(l0)) * LN2;
    }
    if (row1 < p.T) {
        float inv = 1.f / l1;
        mt_bf16 *orow = out + attn_o_off(p, b, row1, h) + 2 * t;
#pragma unroll
        for (int i = 0; i < DT; i++)
            *reinterpret_cast<uint32_t *>(orow + i * 8) = attn_pack(o[i][2] * inv, o[i][3] * inv);
        if (t == 0) lse[attn_lse_off(p, b, h, row1)] = (m1 + __log2f(l1)) * LN2;
    }
}

// The backward kernels' first step, one loop over HD for two products of this warp's 16 rows
// of A (from row a0) with NT*8 rows of B, all shared-memory tiles of leading dimension HD + 8:
// s = A1 B1^T and dp = A2 B2^T (dq: Q K^T and dO V^T; dkv: K Q^T and V dO^T).
template <int HD, int NT>
__device__ __forceinline__ void attn_two_products(float (&s)[NT][4], float (&dp)[NT][4], const mt_bf16 *A1,
                                                  const mt_bf16 *A2, const mt_bf16 *B1, const mt_bf16 *B2, int a0,
                                                  int lane) {
    constexpr int LD = HD + 8, KS = HD / 16;
    int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        uint32_t a1[4], a2[4];
        attn_ld_a(a1, A1, LD, a0, kk * 16, lane);
        attn_ld_a(a2, A2, LD, a0, kk * 16, lane);
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const mt_bf16 *b1 = B1 + (n * 8 + g) * LD + kk * 16 + 2 * t;
            const mt_bf16 *b2 = B2 + (n * 8 + g) * LD + kk * 16 + 2 * t;
            attn_mma(s[n], a1, attn_ld32(b1), attn_ld32(b1 + 8));
            attn_mma(dp[n], a2, attn_ld32(b2), attn_ld32(b2 + 8));
        }
    }
}

template <int HD> static inline size_t attn_mma_dq_smem() {
    return sizeof(mt_bf16) * (size_t)(2 * ATTN_MQ + 2 * ATTN_MK) * (HD + 8);
}

// dq for 64 query rows: S = Q K^T, P = exp(S*scale - lse), dP = dO V^T,
// dS = P (dP - D), dQ += dS K; dq = scale * dQ.
template <int HD>
__global__ void __launch_bounds__(ATTN_MW * 32) attn_dq_mma_kernel(mt_bf16 *dqkv, const mt_bf16 *dout,
                                                                  const mt_bf16 *qkv, const float *lse,
                                                                  const float *Dd, attn_params p) {
    constexpr int LD = HD + 8, DT = HD / 8, NT = ATTN_MK / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    mt_bf16 *Qs = reinterpret_cast<mt_bf16 *>(smem_raw), *dOs = Qs + ATTN_MQ * LD, *Ks = dOs + ATTN_MQ * LD,
              *Vs = Ks + ATTN_MK * LD;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / p.rep;
    int q0 = (gridDim.x - 1 - blockIdx.x) * ATTN_MQ;
    size_t tok0 = (size_t)b * p.T;
    attn_load_tile<HD>(Qs, LD, qkv, tok0 * p.qkv_stride + (size_t)h * HD, p.qkv_stride, q0, ATTN_MQ, p.T);
    attn_load_tile<HD>(dOs, LD, dout, tok0 * p.o_stride + (size_t)h * HD, p.o_stride, q0, ATTN_MQ, p.T);
    int row0 = q0 + warp * 16 + g, row1 = row0 + 8;
    const float sl2 = p.scale * ATTN_LOG2E;
    float lse0 = row0 < p.T ? lse[attn_lse_off(p, b, h, row0)] * ATTN_LOG2E : 0.f;
    float lse1 = row1 < p.T ? lse[attn_lse_off(p, b, h, row1)] * ATTN_LOG2E : 0.f;
    float D0 = row0 < p.T ? Dd[attn_lse_off(p, b, h, row0)] : 0.f;
    float D1 = row1 < p.T ? Dd[attn_lse_off(p, b, h, row1)] : 0.f;
    float dq[DT][4];
#pragma unroll
    for (int i = 0; i < DT; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
    int kend = min(p.T, q0 + ATTN_MQ);
    size_t koff = tok0 * p.qkv_stride + (size_t)(p.NH + kvh) * HD;
    size_t voff = tok0 * p.qkv_stride + (size_t)(p.NH + p.NKV + kvh) * HD;
    for (int kt = 0; kt < kend; kt += ATTN_MK) {
        __syncthreads();
        attn_load_tile<HD>(Ks, LD, qkv, koff, p.qkv_stride, kt, ATTN_MK, p.T);
        attn_load_tile<HD>(Vs, LD, qkv, voff, p.qkv_stride, kt, ATTN_MK, p.T);
        __syncthreads();
        if (kt > q0 + warp * 16 + 15) continue;
        float s[NT][4], dp[NT][4];
        attn_two_products<HD, NT>(s, dp, Qs, dOs, Ks, Vs, warp * 16, lane); // S = Q K^T, dP = dO V^T
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = kt + n * 8 + 2 * t + (e & 1);
                int row = e < 2 ? row0 : row1;
                float P = (key <= row && row < p.T) ? exp2f(s[n][e] * sl2 - (e < 2 ? lse0 : lse1)) : 0.f;
                s[n][e] = P * (dp[n][e] - (e < 2 ? D0 : D1)); // dS
            }
#pragma unroll
        for (int kk = 0; kk < ATTN_MK / 16; kk++) {
            uint32_t a[4];
            a[0] = attn_pack(s[2 * kk][0], s[2 * kk][1]);
            a[1] = attn_pack(s[2 * kk][2], s[2 * kk][3]);
            a[2] = attn_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            a[3] = attn_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
            const mt_bf16 *kr = Ks + (kk * 16 + 2 * t) * LD + g;
#pragma unroll
            for (int i = 0; i < DT; i++)
                attn_mma(dq[i], a, attn_ld2rows(kr + i * 8, LD), attn_ld2rows(kr + 8 * LD + i * 8, LD));
        }
    }
    if (row0 < p.T) {
        mt_bf16 *r = dqkv + attn_q_off(p, b, row0, h) + 2 * t;
#pragma unroll
        for (int i = 0; i < DT; i++)
            *reinterpret_cast<uint32_t *>(r + i * 8) = attn_pack(dq[i][0] * p.scale, dq[i][1] * p.scale);
    }
    if (row1 < p.T) {
        mt_bf16 *r = dqkv + attn_q_off(p, b, row1, h) + 2 * t;
#pragma unroll
        for (int i = 0; i < DT; i++)
            *reinterpret_cast<uint32_t *>(r + i * 8) = attn_pack(dq[i][2] * p.scale, dq[i][3] * p.scale);
    }
}

template <int HD> static inline size_t attn_mma_dkv_smem() {
    return sizeof(mt_bf16) * (size_t)(2 * ATTN_MK + 2 * ATTN_MQ2) * (HD + 8) + sizeof(float) * 2 * ATTN_MQ2;
}

// dk/dv for 64 key rows of kv head kvh (16 per warp), over the group's q heads and
// query tiles of 32: S^T = K Q^T, P^T, dP^T = V dO^T, dS^T = P^T (dP^T - D),
// dV += P^T dO, dK += dS^T Q; dk = scale * dK. Key rows are the M dimension, so
// every product stays inside one warp.
template <int HD>
__global__ void __launch_bounds__(ATTN_MW * 32) attn_dkv_mma_kernel(mt_bf16 *dqkv, const mt_bf16 *dout,
                                                                   const mt_bf16 *qkv, const float *lse,
                                                                   const float *Dd, attn_params p) {
    constexpr int LD = HD + 8, DT = HD / 8, NT = ATTN_MQ2 / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    mt_bf16 *Ks = reinterpret_cast<mt_bf16 *>(smem_raw), *Vs = Ks + ATTN_MK * LD, *Qs = Vs + ATTN_MK * LD,
              *dOs = Qs + ATTN_MQ2 * LD;
    float *lse_s = reinterpret_cast<float *>(dOs + ATTN_MQ2 * LD), *D_s = lse_s + ATTN_MQ2;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    int kvh = blockIdx.y, b = blockIdx.z;
    int k0 = blockIdx.x * ATTN_MK;
    size_t tok0 = (size_t)b * p.T;
    attn_load_tile<HD>(Ks, LD, qkv, tok0 * p.qkv_stride + (size_t)(p.NH + kvh) * HD, p.qkv_stride, k0, ATTN_MK, p.T);
    attn_load_tile<HD>(Vs, LD, qkv, tok0 * p.qkv_stride + (size_t)(p.NH + p.NKV + kvh) * HD, p.qkv_stride, k0, ATTN_MK,
                       p.T);
    int j0 = k0 + warp * 16;          // this warp's first key
    int key0 = j0 + g, key1 = key0 + 8; // this thread's two key rows
    const float sl2 = p.scale * ATTN_LOG2E;
    float dk[DT][4], dv[DT][4];
#pragma unroll
    for (int i = 0; i < DT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[i][e] = dv[i][e] = 0.f;
    for (int hr = 0; hr < p.rep; hr++) {
        int h = kvh * p.rep + hr;
        for (int it = k0; it < p.T; it += ATTN_MQ2) {
            __syncthreads();
            attn_load_tile<HD>(Qs, LD, qkv, tok0 * p.qkv_stride + (size_t)h * HD, p.qkv_stride, it, ATTN_MQ2, p.T);
            attn_load_tile<HD>(dOs, LD, dout, tok0 * p.o_stride + (size_t)h * HD, p.o_stride, it, ATTN_MQ2, p.T);
            if (threadIdx.x < ATTN_MQ2) {
                int q = it + threadIdx.x;
                lse_s[threadIdx.x] = q < p.T ? lse[attn_lse_off(p, b, h, q)] * ATTN_LOG2E : 0.f;
                D_s[threadIdx.x] = q < p.T ? Dd[attn_lse_off(p, b, h, q)] : 0.f;
            }
            __syncthreads();
            if (j0 >= p.T || it + ATTN_MQ2 - 1 < j0) continue; // no key, or every query precedes every key
            float s[NT][4], dp[NT][4];
            attn_two_products<HD, NT>(s, dp, Ks, Vs, Qs, dOs, warp * 16, lane); // S^T = K Q^T, dP^T = V dO^T
            // s -> P^T, dp -> dS^T (rows: keys, columns: queries)
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int qloc = n * 8 + 2 * t + (e & 1), q = it + qloc;
                    int key = e < 2 ? key0 : key1;
                    float P = (q >= key && q < p.T && key < p.T) ? exp2f(s[n][e] * sl2 - lse_s[qloc]) : 0.f;
                    s[n][e] = P;
                    dp[n][e] = P * (dp[n][e] - D_s[qloc]);
                }
#pragma unroll
            for (int kk = 0; kk < ATTN_MQ2 / 16; kk++) {
                uint32_t ap[4], as[4];
                ap[0] = attn_pack(s[2 * kk][0], s[2 * kk][1]);
                ap[1] = attn_pack(s[2 * kk][2], s[2 * kk][3]);
                ap[2] = attn_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                ap[3] = attn_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
                as[0] = attn_pack(dp[2 * kk][0], dp[2 * kk][1]);
                as[1] = attn_pack(dp[2 * kk][2], dp[2 * kk][3]);
                as[2] = attn_pack(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
                as[3] = attn_pack(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
                const mt_bf16 *gr = dOs + (kk * 16 + 2 * t) * LD + g;
                const mt_bf16 *qr = Qs + (kk * 16 + 2 * t) * LD + g;
#pragma unroll
                for (int i = 0; i < DT; i++) {
                    attn_mma(dv[i], ap, attn_ld2rows(gr + i * 8, LD), attn_ld2rows(gr + 8 * LD + i * 8, LD));
                    attn_mma(dk[i], as, attn_ld2rows(qr + i * 8, LD), attn_ld2rows(qr + 8 * LD + i * 8, LD));
                }
            }
        }
    }
    if (key0 < p.T) {
        mt_bf16 *kr = dqkv + attn_k_off(p, b, key0, kvh) + 2 * t, *vr = dqkv + attn_v_off(p, b, key0, kvh) + 2 * t;
#pragma unroll
        for (int i = 0; i < DT; i++) {
            *reinterpret_cast<uint32_t *>(kr + i * 8) = attn_pack(dk[i][0] * p.scale, dk[i][1] * p.scale);
            *reinterpret_cast<uint32_t *>(vr + i * 8) = attn_pack(dv[i][0], dv[i][1]);
        }
    }
    if (key1 < p.T) {
        mt_bf16 *kr = dqkv + attn_k_off(p, b, key1, kvh) + 2 * t, *vr = dqkv + attn_v_off(p, b, key1, kvh) + 2 * t;
#pragma unroll
        for (int i = 0; i < DT; i++) {
            *reinterpret_cast<uint32_t *>(kr + i * 8) = attn_pack(dk[i][2] * p.scale, dk[i][3] * p.scale);
            *reinterpret_cast<uint32_t *>(vr + i * 8) = attn_pack(dv[i][2], dv[i][3]);
        }
    }
}

#endif
