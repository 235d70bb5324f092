// adamw_arm.c: the aarch64 AdamW kernels, NEON (4 lanes, scalar tail) and SVE
// (vector-length agnostic, predicated tail), chosen at run time (simd.c). The
// project compiles for baseline armv8-a, so the SVE code carries its own target
// pragma and runs only where getauxval(AT_HWCAP) has HWCAP_SVE. Each does exactly
// the ops of mt_adamw_elem lane by lane (FMLA where it uses fmaf; FDIV and FSQRT
// are correctly rounded), so results are bitwise those of the reference.
#if defined(__GNUC__) && !defined(__clang__)
// Contraction would fuse a*b+c differently from the reference; fused ops are explicit.
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "optim/adamw_isa.h"

#if defined(__aarch64__) && defined(__GNUC__)

#include <arm_neon.h>
#include <stdint.h>

#define INL static inline __attribute__((always_inline))

// Specialises a loop body per precision mode, so the dtype branches fold away.
#define MT_ADAMW_DISPATCH(loop, a, lo, hi)                                                             \
    do {                                                                                             \
        if ((a)->master) {                                                                           \
            if ((a)->gdt == MT_BF16) loop(a, lo, hi, (a)->pdt == MT_BF16 ? MT_BF16 : MT_F32, MT_BF16, 1); \
            else loop(a, lo, hi, (a)->pdt == MT_BF16 ? MT_BF16 : MT_F32, MT_F32, 1);                 \
        } else if ((a)->pdt == MT_F32) {                                                             \
            if ((a)->gdt == MT_F32) loop(a, lo, hi, MT_F32, MT_F32, 0);                              \
            else loop(a, lo, hi, MT_F32, MT_BF16, 0);                                                \
        } else {                                                                                     \
            if ((a)->gdt == MT_F32) loop(a, lo, hi, MT_BF16, MT_F32, 0);                             \
            else loop(a, lo, hi, MT_BF16, MT_BF16, 0);                                               \
        }                                                                                            \
    } while (0)

// ---- NEON: 4 lanes; the tail runs mt_adamw_elem (same ops, scalar). ----

INL float32x4_t ld_neon(const void *base, mt_dtype t, size_t i) {
    if (t == MT_F32) return vld1q_f32((const float *)base + i);
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)base + i), 16));
}

// Round to nearest even, NaN kept quiet: mt_f32_to_bf16 on 4 lanes.
INL void st_neon(void *base, mt_dtype t, size_t i, float32x4_t x) {
    if (t == MT_F32) {
        vst1q_f32((float *)base + i, x);
        return;
    }
    uint32x4_t u = vreinterpretq_u32_f32(x), hi = vshrq_n_u32(u, 16);
    uint32x4_t r = vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), vandq_u32(hi, vdupq_n_u32(1))), 16);
    uint32x4_t qnan = vorrq_u32(hi, vdupq_n_u32(0x40));
    r = vbslq_u32(vmvnq_u32(vceqq_f32(x, x)), qnan, r);
    vst1_u16((uint16_t *)base + i, vmovn_u32(r));
}

INL void loop_neon(const mt_adamw_args *a, size_t lo, size_t hi, mt_dtype pdt, mt_dtype gdt, int has_master) {
    const mt_adamw_consts *c = &a->c;
    const float32x4_t gscale = vdupq_n_f32(c->gscale), decay = vdupq_n_f32(c->decay);
    const float32x4_t lerp_w = vdupq_n_f32(c->lerp_w), c2 = vdupq_n_f32(c->c2), beta2 = vdupq_n_f32(c->beta2);
    const float32x4_t bc2s = vdupq_n_f32(c->bc2_sqrt), eps = vdupq_n_f32(c->eps);
    const float32x4_t neg_step = vdupq_n_f32(c->neg_step);
    size_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        float32x4_t g = vmulq_f32(ld_neon(a->g, gdt, i), gscale);
        float32x4_t p = has_master ? ld_neon(a->master_in, MT_F32, i) : ld_neon(a->p_in, pdt, i);
        float32x4_t m = ld_neon(a->m_in, MT_F32, i);
        float32x4_t v = ld_neon(a->v_in, MT_F32, i);
        p = vmulq_f32(p, decay);
        m = vfmaq_f32(c->lerp_small ? m : g, lerp_w, vsubq_f32(g, m)); // base + w*(g-m), one rounding
        v = vfmaq_f32(vmulq_f32(v, beta2), vmulq_f32(c2, g), g);
        float32x4_t denom = vaddq_f32(vdivq_f32(vsqrtq_f32(v), bc2s), eps);
        p = vaddq_f32(p, vdivq_f32(vmulq_f32(neg_step, m), denom));
        st_neon(a->m, MT_F32, i, m);
        st_neon(a->v, MT_F32, i, v);
        if (has_master) st_neon(a->master, MT_F32, i, p);
        st_neon(a->p, pdt, i, p);
    }
    for (; i < hi; i++) {
        float pi = has_master ? a->master_in[i] : mt_load_f32(a->p_in, pdt, i);
        float out = mt_adamw_elem(pi, mt_load_f32(a->g, gdt, i), a->m_in[i], a->v_in[i], &a->m[i], &a->v[i], c);
        if (has_master) a->master[i] = out;
        mt_store_f32(a->p, pdt, i, out);
    }
}

void mt_adamw_kernel_neon(const mt_adamw_args *a, size_t lo, size_t hi) { MT_ADAMW_DISPATCH(loop_neon, a, lo, hi); }

// ---- SVE: svcntw() lanes per vector, the last iteration predicated. ----

#pragma GCC push_options
#pragma GCC target("+sve")
#include <arm_sve.h>

INL svfloat32_t ld_sve(svbool_t pg, const void *base, mt_dtype t, size_t i) {
    if (t == MT_F32) return svld1_f32(pg, (const float *)base + i);
    return svreinterpret_f32_u32(svlsl_n_u32_x(pg, svld1uh_u32(pg, (const uint16_t *)base + i), 16));
}

INL void st_sve(svbool_t pg, void *base, mt_dtype t, size_t i, svfloat32_t x) {
    if (t == MT_F32) {
        svst1_f32(pg, (float *)base + i, x);
        return;
    }
    svuint32_t u = svreinterpret_u32_f32(x), hi = svlsr_n_u32_x(pg, u, 16);
    svuint32_t r = svlsr_n_u32_x(pg, svadd_u32_x(pg, svadd_n_u32_x(pg, u, 0x7fff), svand_n_u32_x(pg, hi, 1)), 16);
    r = svsel_u32(svcmpuo_f32(pg, x, x), svorr_n_u32_x(pg, hi, 0x40), r);
    svst1h_u32(pg, (uint16_t *)base + i, r); // stores the low 16 bits of each lane
}

INL void loop_sve(const mt_adamw_args *a, size_t lo, size_t hi, mt_dtype pdt, mt_dtype gdt, int has_master) {
    const mt_adamw_consts *c = &a->c;
    const svfloat32_t gscale = svdup_f32(c->gscale), decay = svdup_f32(c->decay), lerp_w = svdup_f32(c->lerp_w);
    const svfloat32_t c2 = svdup_f32(c->c2), beta2 = svdup_f32(c->beta2), bc2s = svdup_f32(c->bc2_sqrt);
    const svfloat32_t eps = svdup_f32(c->eps), neg_step = svdup_f32(c->neg_step);
    const size_t vl = svcntw();
    for (size_t i = lo; i < hi; i += vl) {
        svbool_t pg = svwhilelt_b32_u64(i, hi);
        svfloat32_t g = svmul_f32_x(pg, ld_sve(pg, a->g, gdt, i), gscale);
        svfloat32_t p = has_master ? ld_sve(pg, a->master_in, MT_F32, i) : ld_sve(pg, a->p_in, pdt, i);
        svfloat32_t m = ld_sve(pg, a->m_in, MT_F32, i);
        svfloat32_t v = ld_sve(pg, a->v_in, MT_F32, i);
        p = svmul_f32_x(pg, p, decay);
        m = svmla_f32_x(pg, c->lerp_small ? m : g, lerp_w, svsub_f32_x(pg, g, m)); // base + w*(g-m), fused
        v = svmla_f32_x(pg, svmul_f32_x(pg, v, beta2), svmul_f32_x(pg, c2, g), g);
        svfloat32_t denom = svadd_f32_x(pg, svdiv_f32_x(pg, svsqrt_f32_x(pg, v), bc2s), eps);
        p = svadd_f32_x(pg, p, svdiv_f32_x(pg, svmul_f32_x(pg, neg_step, m), denom));
        st_sve(pg, a->m, MT_F32, i, m);
        st_sve(pg, a->v, MT_F32, i, v);
        if (has_master) st_sve(pg, a->master, MT_F32, i, p);
        st_sve(pg, a->p, pdt, i, p);
    }
}

void mt_adamw_kernel_sve(const mt_adamw_args *a, size_t lo, size_t hi) { MT_ADAMW_DISPATCH(loop_sve, a, lo, hi); }

#pragma GCC pop_options

#endif
