// adamw_isa.h: private to optim/adamw*.c and tests/test_adamw.c. The per-call
// constants, the one-element update every path shares, and the per-ISA kernels
// (so the test can force each path and compare it bitwise with the reference).
// Paths are named by mt_simd_isa (simd.h).
#ifndef MT_ADAMW_ISA_H
#define MT_ADAMW_ISA_H

#include <math.h>
#include <stddef.h>

#include "optim/adamw.h"
#include "optim/simd.h"

// The f32 scalars torch's CPU kernels receive (each python double cast to f32).
typedef struct {
    float gscale;    // clip factor, already f32 in torch
    float decay;     // f32(1 - lr*wd)
    float lerp_w;    // f32(1 - beta1) when < 0.5, else f32(1 - beta1) - 1
    int lerp_small;  // torch's lerp: a + w*(b-a) for |w| < 0.5, else b + (w-1)*(b-a)
    float beta2;     // f32(beta2)
    float c2;        // f32(1 - beta2)
    float bc2_sqrt;  // f32((1 - beta2^t) ** 0.5)
    float eps;       // f32(eps)
    float neg_step;  // f32(-lr / (1 - beta1^t))
} mt_adamw_consts;

// Read from the *_in pointers, written to the others: the same ones for an update in
// place, a spare set for the speculative step's update out of place.
typedef struct {
    float *master;
    void *p;
    mt_dtype pdt;
    const void *g;
    mt_dtype gdt;
    float *m, *v;
    const float *master_in, *m_in, *v_in;
    const void *p_in;
    mt_adamw_consts c;
} mt_adamw_args;

void mt_adamw_consts_init(mt_adamw_consts *c, const mt_adamw_hparams *h, float wd);

// One element, in torch's op order. fmaf where torch's vectorised CPU kernels
// use vec::fmadd (lerp, addcmul); everything else rounds after each op.
// m and v are read before m_out and v_out are written (they may be the same).
static inline float mt_adamw_elem(float p, float g, float m, float v, float *m_out, float *v_out,
                                  const mt_adamw_consts *c) {
    float gs = g * c->gscale;
    p = p * c->decay;
    float mi = m;
    float d = gs - mi;
    mi = fmaf(c->lerp_w, d, c->lerp_small ? mi : gs);
    float vi = fmaf(c->c2 * gs, gs, v * c->beta2);
    float denom = sqrtf(vi) / c->bc2_sqrt + c->eps;
    p = p + (c->neg_step * mi) / denom;
    *m_out = mi;
    *v_out = vi;
    return p;
}

// mt_adamw_update on a chosen path; isa must be one mt_simd_supported() accepts.
// `out` may be `in` (in place).
void mt_adamw_update_isa(mt_simd_isa isa, const mt_adamw_state *out, const mt_adamw_state *in, mt_dtype pdt,
                         const void *g, mt_dtype gdt, size_t n, const mt_adamw_hparams *h, float wd);
// mt_adamw_update_ranges on a given path (tests run every path).
void mt_adamw_update_ranges_isa(mt_simd_isa isa, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                                const mt_elem_range *r, size_t nr, const mt_adamw_hparams *h, float wd);

// Kernels over elements [lo, hi) of a: x86 in adamw_simd.c, Arm in adamw_arm.c.
// Each is built only for its architecture; elsewhere it is never selected.
void mt_adamw_kernel_avx2(const mt_adamw_args *a, size_t lo, size_t hi);
void mt_adamw_kernel_avx512(const mt_adamw_args *a, size_t lo, size_t hi);
void mt_adamw_kernel_neon(const mt_adamw_args *a, size_t lo, size_t hi);
void mt_adamw_kernel_sve(const mt_adamw_args *a, size_t lo, size_t hi);

#endif
