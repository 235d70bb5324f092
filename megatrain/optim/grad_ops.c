// grad_ops.c: gradient accumulate / sum of squares / scale on the host.
// Threaded over fixed pieces; the generic inner loops are plain C that GCC
// vectorises, cloned per ISA (target_clones) since the project builds for baseline
// x86-64. aarch64 runs NEON or SVE intrinsics instead (grad_ops_arm.c).
#include "optim/grad_ops.h"

#include <stdint.h>
#include <string.h>

#include "optim/grad_ops_isa.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__gnu_linux__)
#define MT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MT_CLONES
#endif

// Below this many elements one thread is faster than waking a team.
#define MT_GRAD_PAR_MIN ((size_t)1 << 15)
// sumsq partition: fixed blocks, each summed in a fixed order, block sums
// added in block order, so the result is the same for any thread count.
#define MT_SUMSQ_BLOCK ((size_t)1 << 16)
// Blocks per round: bounds the on-stack array of block sums (64 Mi elements).
#define MT_SUMSQ_ROUND 1024

static inline float bf16_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Elementwise work is shared out in fixed pieces (a multiple of 64 elements) taken
// by whichever thread is free: no thread waits for a slowed one (see adamw.c).
#define MT_GRAD_PIECE ((size_t)1 << 17)

static inline long n_pieces(size_t n) { return (long)((n + MT_GRAD_PIECE - 1) / MT_GRAD_PIECE); }
static inline size_t piece_end(size_t lo, size_t n) { return lo + MT_GRAD_PIECE < n ? lo + MT_GRAD_PIECE : n; }

// ---------------------------------------------------------------- generic kernels

MT_CLONES static void add_f32(float *restrict d, const float *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = d[i] + s[i];
}

MT_CLONES static void add_bf16(uint16_t *restrict d, const uint16_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = mt_bf16_rne(bf16_f32(d[i]) + bf16_f32(s[i]));
}

// The fixed lane order of grad_ops_isa.h. x*x is exact in double, so fused or
// not the result is the same.
MT_CLONES static double block_f32(const float *x, size_t n) {
    double acc[MT_SUMSQ_LANES] = {0};
    size_t i = 0;
    for (; i + MT_SUMSQ_LANES <= n; i += MT_SUMSQ_LANES)
        for (int j = 0; j < MT_SUMSQ_LANES; j++) acc[j] += (double)x[i + j] * (double)x[i + j];
    for (; i < n; i++) acc[i % MT_SUMSQ_LANES] += (double)x[i] * (double)x[i];
    return mt_sumsq_lanes(acc);
}

MT_CLONES static double block_bf16(const uint16_t *x, size_t n) {
    double acc[MT_SUMSQ_LANES] = {0};
    size_t i = 0;
    for (; i + MT_SUMSQ_LANES <= n; i += MT_SUMSQ_LANES)
        for (int j = 0; j < MT_SUMSQ_LANES; j++) {
            double f = bf16_f32(x[i + j]);
            acc[j] += f * f;
        }
    for (; i < n; i++) {
        double f = bf16_f32(x[i]);
        acc[i % MT_SUMSQ_LANES] += f * f;
    }
    return mt_sumsq_lanes(acc);
}

MT_CLONES static void scale_f32(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] * s;
}

MT_CLONES static void scale_bf16(uint16_t *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = mt_bf16_rne(bf16_f32(x[i]) * s);
}

const mt_grad_kernels mt_grad_kernels_generic = {add_f32, add_bf16, block_f32, block_bf16, scale_f32, scale_bf16};

static const mt_grad_kernels *kernels(mt_simd_isa isa) {
#if defined(__aarch64__) && defined(__GNUC__)
    if (isa == MT_SIMD_SVE) return &mt_grad_kernels_sve;
    if (isa == MT_SIMD_NEON) return &mt_grad_kernels_neon;
#endif
    (void)isa;
    return &mt_grad_kernels_generic;
}

// ---------------------------------------------------------------- the threaded ops

void mt_grad_accumulate_isa(mt_simd_isa isa, void *dst, const void *src, mt_dtype t, size_t n, int first) {
    const mt_grad_kernels *k = kernels(isa);
    size_t es = mt_dtype_size(t);
#pragma omp parallel for schedule(dynamic, 1) if (n >= MT_GRAD_PAR_MIN)
    for (long p = 0; p < n_pieces(n); p++) {
        size_t lo = (size_t)p * MT_GRAD_PIECE, hi = piece_end(lo, n);
        if (first) memcpy((char *)dst + lo * es, (const char *)src + lo * es, (hi - lo) * es);
        else if (t == MT_F32) k->add_f32((float *)dst + lo, (const float *)src + lo, hi - lo);
        else k->add_bf16((uint16_t *)dst + lo, (const uint16_t *)src + lo, hi - lo);
    }
}

double mt_grad_sumsq_isa(mt_simd_isa isa, const void *x, mt_dtype t, size_t n) {
    const mt_grad_kernels *k = kernels(isa);
    size_t nblocks = (n + MT_SUMSQ_BLOCK - 1) / MT_SUMSQ_BLOCK;
    double total = 0.0;
    double sums[MT_SUMSQ_ROUND];
    for (size_t b0 = 0; b0 < nblocks; b0 += MT_SUMSQ_ROUND) {
        long nb = (long)(nblocks - b0 < MT_SUMSQ_ROUND ? nblocks - b0 : MT_SUMSQ_ROUND);
#pragma omp parallel for schedule(dynamic, 4) if (n >= MT_GRAD_PAR_MIN)
        for (long b = 0; b < nb; b++) {
            size_t lo = (b0 + (size_t)b) * MT_SUMSQ_BLOCK;
            size_t len = n - lo < MT_SUMSQ_BLOCK ? n - lo : MT_SUMSQ_BLOCK;
            sums[b] = t == MT_F32 ? k->sumsq_f32((const float *)x + lo, len)
                                  : k->sumsq_bf16((const uint16_t *)x + lo, len);
        }
        for (long b = 0; b < nb; b++) total += sums[b];
    }
    return total;
}

void mt_grad_scale_isa(mt_simd_isa isa, void *x, mt_dtype t, size_t n, float s) {
    const mt_grad_kernels *k = kernels(isa);
#pragma omp parallel for schedule(dynamic, 1) if (n >= MT_GRAD_PAR_MIN)
    for (long p = 0; p < n_pieces(n); p++) {
        size_t lo = (size_t)p * MT_GRAD_PIECE, hi = piece_end(lo, n);
        if (t == MT_F32) k->scale_f32((float *)x + lo, hi - lo, s);
        else k->scale_bf16((uint16_t *)x + lo, hi - lo, s);
    }
}

void mt_grad_accumulate(void *dst, const void *src, mt_dtype t, size_t n, int first) {
    mt_grad_accumulate_isa(mt_simd_best(), dst, src, t, n, first);
}

double mt_grad_sumsq(const void *x, mt_dtype t, size_t n) { return mt_grad_sumsq_isa(mt_simd_best(), x, t, n); }

void mt_grad_scale(void *x, mt_dtype t, size_t n, float s) { mt_grad_scale_isa(mt_simd_best(), x, t, n, s); }
