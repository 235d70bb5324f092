// adamw.c: AdamW constants (torch's scalar arithmetic), the scalar reference,
// the scalar fast path, ISA dispatch and the OpenMP split. SIMD kernels: adamw_simd.c
// (x86), adamw_arm.c (aarch64).
#if defined(__GNUC__) && !defined(__clang__)
// Contraction would fuse a*b+c differently from the reference; torch's fused ops are explicit fmaf.
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "optim/adamw.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <omp.h>

#include "optim/adamw_isa.h"

// Below this many elements one thread is faster than waking a team.
#define MT_ADAMW_PAR_MIN ((size_t)1 << 15)
// Work is shared out in pieces of this many elements (a multiple of 64, so vectors
// stay cache-line aligned): 28-44 B/element of traffic, about 2 MiB a piece.
#define MT_ADAMW_PIECE ((size_t)1 << 16)

// Hyperparameters arrive as f32, but torch does its scalar maths on the python
// doubles the user typed (0.9, 3e-4). Widen each to the double of its shortest
// round-tripping decimal so that those values reproduce torch bit for bit.
static double widen(float f) {
    char buf[32];
    if (!isfinite(f)) return (double)f;
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if (strtof(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

void mt_adamw_consts_init(mt_adamw_consts *c, const mt_adamw_hparams *h, float wd) {
    double lr = widen(h->lr), beta1 = widen(h->beta1), beta2 = widen(h->beta2), dwd = widen(wd);
    double step = (double)h->step;
    double bc1 = 1.0 - pow(beta1, step);
    double bc2 = 1.0 - pow(beta2, step);
    float w1 = (float)(1.0 - beta1);
    c->gscale = h->grad_scale;
    c->decay = (float)(1.0 - lr * dwd);
    c->lerp_small = fabsf(w1) < 0.5f;
    c->lerp_w = c->lerp_small ? w1 : w1 - 1.0f;
    c->beta2 = (float)beta2;
    c->c2 = (float)(1.0 - beta2);
    c->bc2_sqrt = (float)pow(bc2, 0.5); // python's `bc2 ** 0.5` is libm pow, not sqrt
    c->eps = h->eps;
    c->neg_step = (float)(-(lr / bc1));
}

void mt_adamw_update_ref(float *master, void *p, mt_dtype pdt, const void *g, mt_dtype gdt, float *m, float *v,
                         size_t n, const mt_adamw_hparams *h, float wd) {
    mt_adamw_consts c;
    mt_adamw_consts_init(&c, h, wd);
    for (size_t i = 0; i < n; i++) {
        float pi = master ? master[i] : mt_load_f32(p, pdt, i);
        float out = mt_adamw_elem(pi, mt_load_f32(g, gdt, i), m[i], v[i], &m[i], &v[i], &c);
        if (master) master[i] = out;
        mt_store_f32(p, pdt, i, out);
    }
}

// Scalar fast path: the reference loop with the dtype branches hoisted.
static void kernel_scalar(const mt_adamw_args *a, size_t lo, size_t hi) {
    const mt_adamw_consts *c = &a->c;
    for (size_t i = lo; i < hi; i++) {
        float pi = a->master_in ? a->master_in[i] : mt_load_f32(a->p_in, a->pdt, i);
        float out = mt_adamw_elem(pi, mt_load_f32(a->g, a->gdt, i), a->m_in[i], a->v_in[i], &a->m[i], &a->v[i], c);
        if (a->master) a->master[i] = out;
        mt_store_f32(a->p, a->pdt, i, out);
    }
}

const char *mt_adamw_isa(void) { return mt_simd_name(mt_simd_best()); }

typedef void (*adamw_kernel)(const mt_adamw_args *, size_t, size_t);

static adamw_kernel kernel_for(mt_simd_isa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == MT_SIMD_AVX512) return mt_adamw_kernel_avx512;
    if (isa == MT_SIMD_AVX2) return mt_adamw_kernel_avx2;
#elif defined(__aarch64__) && defined(__GNUC__)
    if (isa == MT_SIMD_SVE) return mt_adamw_kernel_sve;
    if (isa == MT_SIMD_NEON) return mt_adamw_kernel_neon;
#endif
    (void)isa;
    return kernel_scalar;
}

static mt_adamw_args args_of(const mt_adamw_state *out, const mt_adamw_state *in, mt_dtype pdt, const void *g,
                             mt_dtype gdt, const mt_adamw_hparams *h, float wd) {
    mt_adamw_args a = {.master = out->master, .p = out->p, .pdt = pdt, .g = g, .gdt = gdt, .m = out->m, .v = out->v,
                       .master_in = in->master, .p_in = in->p, .m_in = in->m, .v_in = in->v};
    mt_adamw_consts_init(&a.c, h, wd);
    return a;
}

void mt_adamw_update_isa(mt_simd_isa isa, const mt_adamw_state *out, const mt_adamw_state *in, mt_dtype pdt,
                         const void *g, mt_dtype gdt, size_t n, const mt_adamw_hparams *h, float wd) {
    if (n == 0) return;
    mt_adamw_args a = args_of(out, in, pdt, g, gdt, h, wd);
    adamw_kernel kernel = kernel_for(isa);
    // Fixed pieces taken by whichever thread is free: each element is independent, so
    // the result does not depend on the thread count or order; and a thread slowed by a
    // core it shares (the drain's team, a waiting host thread) holds up no one, as one
    // static chunk per thread did (the whole pass ran at its slowest thread's speed).
    long pieces = (long)((n + MT_ADAMW_PIECE - 1) / MT_ADAMW_PIECE);
#pragma omp parallel for schedule(dynamic, 1) if (n >= MT_ADAMW_PAR_MIN)
    for (long k = 0; k < pieces; k++) {
        size_t lo = (size_t)k * MT_ADAMW_PIECE, hi = lo + MT_ADAMW_PIECE < n ? lo + MT_ADAMW_PIECE : n;
        kernel(&a, lo, hi);
    }
}

void mt_adamw_update_ranges_isa(mt_simd_isa isa, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                                const mt_elem_range *r, size_t nr, const mt_adamw_hparams *h, float wd) {
    mt_adamw_args a = args_of(s, s, pdt, g, gdt, h, wd);
    adamw_kernel kernel = kernel_for(isa);
    size_t total = 0, pieces = 0;
    for (size_t i = 0; i < nr; i++) {
        total += r[i].hi - r[i].lo;
        pieces += (r[i].hi - r[i].lo + MT_ADAMW_PIECE - 1) / MT_ADAMW_PIECE;
    }
    // The ranges cut into pieces of at most MT_ADAMW_PIECE, shared out as the whole pass's
    // are. Each element's result depends on nothing but its own inputs (the SIMD tails run
    // the same ops), so an element updated here is bitwise what the whole pass gives it.
    mt_elem_range *piece = malloc((pieces ? pieces : 1) * sizeof *piece);
    if (!piece) { // no memory for the list: the same pieces, on this thread
        for (size_t i = 0; i < nr; i++)
            for (size_t lo = r[i].lo; lo < r[i].hi; lo += MT_ADAMW_PIECE)
                kernel(&a, lo, lo + MT_ADAMW_PIECE < r[i].hi ? lo + MT_ADAMW_PIECE : r[i].hi);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < nr; i++)
        for (size_t lo = r[i].lo; lo < r[i].hi; lo += MT_ADAMW_PIECE)
            piece[k++] = (mt_elem_range){lo, lo + MT_ADAMW_PIECE < r[i].hi ? lo + MT_ADAMW_PIECE : r[i].hi};
#pragma omp parallel for schedule(dynamic, 16) if (total >= MT_ADAMW_PAR_MIN)
    for (long j = 0; j < (long)k; j++) kernel(&a, piece[j].lo, piece[j].hi);
    free(piece);
}

void mt_adamw_update_ranges(const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                            const mt_elem_range *r, size_t nr, const mt_adamw_hparams *h, float wd) {
    mt_adamw_update_ranges_isa(mt_simd_best(), s, pdt, g, gdt, r, nr, h, wd);
}

void mt_adamw_update(float *master, void *p, mt_dtype pdt, const void *g, mt_dtype gdt, float *m, float *v, size_t n,
                     const mt_adamw_hparams *h, float wd) {
    mt_adamw_state s = {.p = p, .m = m, .v = v, .master = master};
    mt_adamw_update_isa(mt_simd_best(), &s, &s, pdt, g, gdt, n, h, wd);
}

void mt_adamw_update_to(const mt_adamw_state *out, const mt_adamw_state *in, mt_dtype pdt, const void *g,
                        mt_dtype gdt, size_t n, const mt_adamw_hparams *h, float wd) {
    mt_adamw_update_isa(mt_simd_best(), out, in, pdt, g, gdt, n, h, wd);
}
