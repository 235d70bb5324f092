// grad_ops_arm.c: the aarch64 gradient kernels (accumulate, sum of squares, scale),
// NEON and SVE, behind the table of grad_ops_isa.h and chosen at run time (simd.c).
// Each gives the bits of the generic C loop: the adds and multiplies round as
// they do there, bf16 rounds to nearest even with NaN kept quiet, and sumsq keeps
// the generic loop's lane order (x*x is exact in double, so FMLA changes nothing).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "optim/grad_ops_isa.h"

#if defined(__aarch64__) && defined(__GNUC__)

#include <arm_neon.h>

#define INL static inline __attribute__((always_inline))

// ---------------------------------------------------------------- NEON

INL float32x4_t bf16x4_f32(uint16x4_t h) { return vreinterpretq_f32_u32(vshll_n_u16(h, 16)); }

// mt_bf16_rne on 4 lanes.
INL uint16x4_t f32x4_bf16(float32x4_t x) {
    uint32x4_t u = vreinterpretq_u32_f32(x), hi = vshrq_n_u32(u, 16);
    uint32x4_t r = vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), vandq_u32(hi, vdupq_n_u32(1))), 16);
    r = vbslq_u32(vmvnq_u32(vceqq_f32(x, x)), vorrq_u32(hi, vdupq_n_u32(0x40)), r);
    return vmovn_u32(r);
}

static void add_f32_neon(float *restrict d, const float *restrict s, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(d + i, vaddq_f32(vld1q_f32(d + i), vld1q_f32(s + i)));
    for (; i < n; i++) d[i] = d[i] + s[i];
}

static void add_bf16_neon(uint16_t *restrict d, const uint16_t *restrict s, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(d + i, f32x4_bf16(vaddq_f32(bf16x4_f32(vld1_u16(d + i)), bf16x4_f32(vld1_u16(s + i)))));
    for (; i < n; i++) d[i] = mt_bf16_rne(mt_bf16_to_f32(d[i]) + mt_bf16_to_f32(s[i]));
}

// Eight consecutive lanes as four float64x2 (a[0] lanes 0-1, a[1] lanes 2-3, ...).
INL void sq_acc(float32x4_t lo4, float32x4_t hi4, float64x2_t *a) {
    float64x2_t d0 = vcvt_f64_f32(vget_low_f32(lo4)), d1 = vcvt_high_f64_f32(lo4);
    float64x2_t d2 = vcvt_f64_f32(vget_low_f32(hi4)), d3 = vcvt_high_f64_f32(hi4);
    a[0] = vaddq_f64(a[0], vmulq_f64(d0, d0));
    a[1] = vaddq_f64(a[1], vmulq_f64(d1, d1));
    a[2] = vaddq_f64(a[2], vmulq_f64(d2, d2));
    a[3] = vaddq_f64(a[3], vmulq_f64(d3, d3));
}

// The MT_SUMSQ_LANES lanes as that many / 2 float64x2, a[k] holding lanes 2k and 2k+1.
#define SQ_VECS (MT_SUMSQ_LANES / 2)

INL void sq_zero(float64x2_t *a) {
    for (int k = 0; k < SQ_VECS; k++) a[k] = vdupq_n_f64(0);
}

INL void sq_store(const float64x2_t *a, double acc[MT_SUMSQ_LANES]) {
    for (int k = 0; k < SQ_VECS; k++) vst1q_f64(acc + 2 * k, a[k]);
}

static double sumsq_f32_neon(const float *x, size_t n) {
    float64x2_t a[SQ_VECS];
    sq_zero(a);
    size_t i = 0;
    for (; i + MT_SUMSQ_LANES <= n; i += MT_SUMSQ_LANES)
        for (int g = 0; g < MT_SUMSQ_LANES; g += 8) sq_acc(vld1q_f32(x + i + g), vld1q_f32(x + i + g + 4), a + g / 2);
    double acc[MT_SUMSQ_LANES];
    sq_store(a, acc);
    for (; i < n; i++) acc[i % MT_SUMSQ_LANES] += (double)x[i] * (double)x[i];
    return mt_sumsq_lanes(acc);
}

static double sumsq_bf16_neon(const uint16_t *x, size_t n) {
    float64x2_t a[SQ_VECS];
    sq_zero(a);
    size_t i = 0;
    for (; i + MT_SUMSQ_LANES <= n; i += MT_SUMSQ_LANES)
        for (int g = 0; g < MT_SUMSQ_LANES; g += 8) {
            uint16x8_t h = vld1q_u16(x + i + g);
            sq_acc(vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
                   vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)), a + g / 2);
        }
    double acc[MT_SUMSQ_LANES];
    sq_store(a, acc);
    for (; i < n; i++) {
        double f = mt_bf16_to_f32(x[i]);
        acc[i % MT_SUMSQ_LANES] += f * f;
    }
    return mt_sumsq_lanes(acc);
}

static void scale_f32_neon(float *x, size_t n, float s) {
    size_t i = 0;
    float32x4_t sv = vdupq_n_f32(s);
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), sv));
    for (; i < n; i++) x[i] = x[i] * s;
}

static void scale_bf16_neon(uint16_t *x, size_t n, float s) {
    size_t i = 0;
    float32x4_t sv = vdupq_n_f32(s);
    for (; i + 4 <= n; i += 4) vst1_u16(x + i, f32x4_bf16(vmulq_f32(bf16x4_f32(vld1_u16(x + i)), sv)));
    for (; i < n; i++) x[i] = mt_bf16_rne(mt_bf16_to_f32(x[i]) * s);
}

const mt_grad_kernels mt_grad_kernels_neon = {add_f32_neon,    add_bf16_neon,  sumsq_f32_neon,
                                              sumsq_bf16_neon, scale_f32_neon, scale_bf16_neon};

// ---------------------------------------------------------------- SVE

#pragma GCC push_options
#pragma GCC target("+sve")
#include <arm_sve.h>

INL svfloat32_t ld_bf16_sve(svbool_t pg, const uint16_t *h) {
    return svreinterpret_f32_u32(svlsl_n_u32_x(pg, svld1uh_u32(pg, h), 16));
}

// mt_bf16_rne per lane, stored as the low 16 bits of each 32-bit lane.
INL void st_bf16_sve(svbool_t pg, uint16_t *h, svfloat32_t x) {
    svuint32_t u = svreinterpret_u32_f32(x), hi = svlsr_n_u32_x(pg, u, 16);
    svuint32_t r = svlsr_n_u32_x(pg, svadd_u32_x(pg, svadd_n_u32_x(pg, u, 0x7fff), svand_n_u32_x(pg, hi, 1)), 16);
    r = svsel_u32(svcmpuo_f32(pg, x, x), svorr_n_u32_x(pg, hi, 0x40), r);
    svst1h_u32(pg, h, r);
}

static void add_f32_sve(float *restrict d, const float *restrict s, size_t n) {
    for (size_t i = 0; i < n; i += svcntw()) {
        svbool_t pg = svwhilelt_b32_u64(i, n);
        svst1_f32(pg, d + i, svadd_f32_x(pg, svld1_f32(pg, d + i), svld1_f32(pg, s + i)));
    }
}

static void add_bf16_sve(uint16_t *restrict d, const uint16_t *restrict s, size_t n) {
    for (size_t i = 0; i < n; i += svcntw()) {
        svbool_t pg = svwhilelt_b32_u64(i, n);
        st_bf16_sve(pg, d + i, svadd_f32_x(pg, ld_bf16_sve(pg, d + i), ld_bf16_sve(pg, s + i)));
    }
}

static void scale_f32_sve(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i += svcntw()) {
        svbool_t pg = svwhilelt_b32_u64(i, n);
        svst1_f32(pg, x + i, svmul_n_f32_x(pg, svld1_f32(pg, x + i), s));
    }
}

static void scale_bf16_sve(uint16_t *x, size_t n, float s) {
    for (size_t i = 0; i < n; i += svcntw()) {
        svbool_t pg = svwhilelt_b32_u64(i, n);
        st_bf16_sve(pg, x + i, svmul_n_f32_x(pg, ld_bf16_sve(pg, x + i), s));
    }
}

// sumsq is NEON's: the lane order needs MT_SUMSQ_LANES / svcntd() accumulators, and SVE's
// sizeless vectors cannot be held in an array sized at run time. On 128-bit SVE (Grace's
// Neoverse V2) NEON is as wide; on wider SVE this pass has not been measured.
const mt_grad_kernels mt_grad_kernels_sve = {add_f32_sve,     add_bf16_sve,  sumsq_f32_neon,
                                             sumsq_bf16_neon, scale_f32_sve, scale_bf16_sve};

#pragma GCC pop_options

#endif
