// grad_ops_isa.h: private to optim/grad_ops*.c and tests/test_grad_ops.c. The
// per-ISA kernels behind grad_ops.h as one table per path, so that the test can
// force each path and compare it with its scalar reference and with the others.
#ifndef MT_GRAD_OPS_ISA_H
#define MT_GRAD_OPS_ISA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "optim/grad_ops.h"
#include "optim/simd.h"

// sumsq's fixed order: lane j of a block sums elements i = j (mod MT_SUMSQ_LANES) in
// order, then the lanes are added pairwise, (l0+l1)+(l2+l3) and so on up the tree
// (mt_sumsq_lanes). Every path keeps it, so every path gives the same bits. 32 lanes:
// with 8, each core waited on the latency of one chain of double adds (8 GB/s of bf16 on
// the dev VM, 53 GB/s on the 16-core H200 host); 32 independent chains run at ~2x that.
#define MT_SUMSQ_LANES 32

typedef struct {
    void (*add_f32)(float *restrict d, const float *restrict s, size_t n);          // d = d + s
    void (*add_bf16)(uint16_t *restrict d, const uint16_t *restrict s, size_t n);   // d = bf16(d + s)
    double (*sumsq_f32)(const float *x, size_t n);                                  // one block, fixed order
    double (*sumsq_bf16)(const uint16_t *x, size_t n);
    void (*scale_f32)(float *x, size_t n, float s);                                 // x = x * s
    void (*scale_bf16)(uint16_t *x, size_t n, float s);                             // x = bf16(x * s)
} mt_grad_kernels;

// Plain C (grad_ops.c; cloned per x86 ISA with target_clones), and the aarch64
// intrinsics paths (grad_ops_arm.c, defined only on aarch64).
extern const mt_grad_kernels mt_grad_kernels_generic;
extern const mt_grad_kernels mt_grad_kernels_neon;
extern const mt_grad_kernels mt_grad_kernels_sve;

// The ops of grad_ops.h on a chosen path; isa must be one mt_simd_supported() accepts.
// x86 paths all run the generic (cloned) kernels.
void mt_grad_accumulate_isa(mt_simd_isa isa, void *dst, const void *src, mt_dtype t, size_t n, int first);
double mt_grad_sumsq_isa(mt_simd_isa isa, const void *x, mt_dtype t, size_t n);
void mt_grad_scale_isa(mt_simd_isa isa, void *x, mt_dtype t, size_t n, float s);

// The lane sums' fixed tree (shared so that no path can add them differently).
static inline double mt_sumsq_lanes(const double acc[MT_SUMSQ_LANES]) {
    double t[MT_SUMSQ_LANES];
    memcpy(t, acc, sizeof t);
    for (int w = 1; w < MT_SUMSQ_LANES; w *= 2)
        for (int j = 0; j < MT_SUMSQ_LANES; j += 2 * w) t[j] = t[j] + t[j + w];
    return t[0];
}

// mt_f32_to_bf16 without branches, so that loops over it vectorise.
static inline uint16_t mt_bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

#endif
