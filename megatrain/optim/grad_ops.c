// grad_ops.c: gradient accumulate / sum of squares / scale on the host.
// Threaded over contiguous chunks; the inner loops are plain C that GCC
// vectorises, cloned per ISA (target_clones) since the project builds for baseline x86-64.
#include "optim/grad_ops.h"

#include <stdint.h>
#include <string.h>

#include <omp.h>

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
#define MT_SUMSQ_LANES 8
// Blocks per round: bounds the on-stack array of block sums (64 Mi elements).
#define MT_SUMSQ_ROUND 1024

// mt_f32_to_bf16 without branches, so that loops over it vectorise.
static inline uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

static inline float bf16_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// Splits [0, n) into one contiguous, 64-element aligned chunk per thread.
static inline void chunk(size_t n, size_t *lo, size_t *hi) {
    size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    size_t per = ((n + nt - 1) / nt + 63) & ~(size_t)63;
    *lo = t * per < n ? t * per : n;
    *hi = *lo + per < n ? *lo + per : n;
}

MT_CLONES static void add_f32(float *restrict d, const float *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = d[i] + s[i];
}

MT_CLONES static void add_bf16(uint16_t *restrict d, const uint16_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = bf16_rne(bf16_f32(d[i]) + bf16_f32(s[i]));
}

void mt_grad_accumulate(void *dst, const void *src, mt_dtype t, size_t n, int first) {
    size_t es = mt_dtype_size(t);
#pragma omp parallel if (n >= MT_GRAD_PAR_MIN)
    {
        size_t lo, hi;
        chunk(n, &lo, &hi);
        if (lo < hi) {
            if (first) memcpy((char *)dst + lo * es, (const char *)src + lo * es, (hi - lo) * es);
            else if (t == MT_F32) add_f32((float *)dst + lo, (const float *)src + lo, hi - lo);
            else add_bf16((uint16_t *)dst + lo, (const uint16_t *)src + lo, hi - lo);
        }
    }
}

// Lane j sums elements i = j (mod LANES) in order; lanes are then added in a
// fixed tree. x*x is exact in double, so fused or not the result is the same.
MT_CLONES static double block_f32(const float *x, size_t n) {
    double acc[MT_SUMSQ_LANES] = {0};
    size_t i = 0;
    for (; i + MT_SUMSQ_LANES <= n; i += MT_SUMSQ_LANES)
        for (int j = 0; j < MT_SUMSQ_LANES; j++) acc[j] += (double)x[i + j] * (double)x[i + j];
    for (; i < n; i++) acc[i % MT_SUMSQ_LANES] += (double)x[i] * (double)x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
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
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double mt_grad_sumsq(const void *x, mt_dtype t, size_t n) {
    size_t nblocks = (n + MT_SUMSQ_BLOCK - 1) / MT_SUMSQ_BLOCK;
    double total = 0.0;
    double sums[MT_SUMSQ_ROUND];
    for (size_t b0 = 0; b0 < nblocks; b0 += MT_SUMSQ_ROUND) {
        long nb = (long)(nblocks - b0 < MT_SUMSQ_ROUND ? nblocks - b0 : MT_SUMSQ_ROUND);
#pragma omp parallel for schedule(static) if (n >= MT_GRAD_PAR_MIN)
        for (long b = 0; b < nb; b++) {
            size_t lo = (b0 + (size_t)b) * MT_SUMSQ_BLOCK;
            size_t len = n - lo < MT_SUMSQ_BLOCK ? n - lo : MT_SUMSQ_BLOCK;
            sums[b] = t == MT_F32 ? block_f32((const float *)x + lo, len) : block_bf16((const uint16_t *)x + lo, len);
        }
        for (long b = 0; b < nb; b++) total += sums[b];
    }
    return total;
}

MT_CLONES static void scale_f32(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] * s;
}

MT_CLONES static void scale_bf16(uint16_t *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] = bf16_rne(bf16_f32(x[i]) * s);
}

void mt_grad_scale(void *x, mt_dtype t, size_t n, float s) {
#pragma omp parallel if (n >= MT_GRAD_PAR_MIN)
    {
        size_t lo, hi;
        chunk(n, &lo, &hi);
        if (lo < hi) {
            if (t == MT_F32) scale_f32((float *)x + lo, hi - lo, s);
            else scale_bf16((uint16_t *)x + lo, hi - lo, s);
        }
    }
}
