// adamw_kernels.cuh: the device AdamW and gradient sum of squares, bitwise the host's
// (optim/adamw_isa.h mt_adamw_elem; optim/grad_ops.c's blocks, lanes and order). Every
// rounding is explicit (__f*_rn, __fmaf_rn only where the host calls fmaf), and this
// folder is compiled without --use_fast_math (-fmad=false -ftz=false): nothing is
// contracted, flushed or approximated. Included by cuda_adamw.cu and lab/adamw.cu.
#ifndef MT_ADAMW_KERNELS_CUH
#define MT_ADAMW_KERNELS_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

// mt_adamw_consts (optim/adamw_isa.h), field for field: computed on the host, in doubles,
// by mt_adamw_consts_init, so the device never recomputes a constant differently.
typedef struct {
    float gscale, decay, lerp_w;
    int lerp_small;
    float beta2, c2, bc2_sqrt, eps, neg_step;
} mt_adamw_dev_consts;

// bf16 <-> f32 as core/dtype.h: round to nearest even, a NaN kept quiet with its sign and top bits.
__device__ __forceinline__ float mt_ex_load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float mt_ex_load(const uint16_t *p, size_t i) { return __uint_as_float((uint32_t)p[i] << 16); }
__device__ __forceinline__ void mt_ex_store(float *p, size_t i, float f) { p[i] = f; }
__device__ __forceinline__ void mt_ex_store(uint16_t *p, size_t i, float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        p[i] = (uint16_t)((u >> 16) | 0x40u);
        return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    p[i] = (uint16_t)(u >> 16);
}

// mt_adamw_elem, op for op.
__device__ __forceinline__ float mt_ex_adamw_elem(float p, float g, float *m, float *v, const mt_adamw_dev_consts &c) {
    float gs = __fmul_rn(g, c.gscale);
    p = __fmul_rn(p, c.decay);
    float mi = *m;
    float d = __fsub_rn(gs, mi);
    mi = __fmaf_rn(c.lerp_w, d, c.lerp_small ? mi : gs);
    float vi = __fmaf_rn(__fmul_rn(c.c2, gs), gs, __fmul_rn(*v, c.beta2));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
    p = __fadd_rn(p, __fdiv_rn(__fmul_rn(c.neg_step, mi), denom));
    *m = mi;
    *v = vi;
    return p;
}

// P, G: float (f32) or uint16_t (bf16). With a master the f32 master is read and written and
// p receives its rounding, as on the host.
template <typename P, typename G, bool MASTER>
__global__ void mt_ex_adamw_kernel(float *master, P *p, const G *g, float *m, float *v, size_t n,
                                   mt_adamw_dev_consts c) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = MASTER ? master[i] : mt_ex_load(p, i);
        float mi = m[i], vi = v[i];
        float out = mt_ex_adamw_elem(pi, mt_ex_load(g, i), &mi, &vi, c);
        m[i] = mi;
        v[i] = vi;
        if (MASTER) master[i] = out;
        mt_ex_store(p, i, out);
    }
}

// grad_ops.c's add_f32 / add_bf16: d = t(f32(d) + f32(s)), one rounding.
template <typename T> __global__ void mt_ex_grad_add(T *d, const T *s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        mt_ex_store(d, i, __fadd_rn(mt_ex_load(d, i), mt_ex_load(s, i)));
}

// grad_ops.c's sum of squares: blocks of MT_EX_SUMSQ_BLOCK elements; in a block, lane j
// (one thread of 32) sums elements j mod 32 in order; the lanes are added pairwise up the
// tree of mt_sumsq_lanes; the block sums are added in block order from 0.
#define MT_EX_SUMSQ_BLOCK ((size_t)1 << 16)
#define MT_EX_SUMSQ_LANES 32

template <typename T> __global__ void mt_ex_sumsq_blocks(double *sums, const T *x, size_t n) {
    __shared__ double lane[MT_EX_SUMSQ_LANES];
    size_t lo = (size_t)blockIdx.x * MT_EX_SUMSQ_BLOCK;
    size_t len = n - lo < MT_EX_SUMSQ_BLOCK ? n - lo : MT_EX_SUMSQ_BLOCK;
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < len; i += MT_EX_SUMSQ_LANES) {
        double f = (double)mt_ex_load(x, lo + i);
        acc = __dadd_rn(acc, __dmul_rn(f, f)); // f*f is exact in double: fused or not, the same
    }
    lane[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < MT_EX_SUMSQ_LANES; w *= 2)
            for (int j = 0; j < MT_EX_SUMSQ_LANES; j += 2 * w) lane[j] = __dadd_rn(lane[j], lane[j + w]);
        sums[blockIdx.x] = lane[0];
    }
}

__global__ void mt_ex_sumsq_total(double *out, const double *sums, size_t nb) {
    double t = 0.0;
    for (size_t b = 0; b < nb; b++) t = __dadd_rn(t, sums[b]);
    *out = t;
}

#endif
