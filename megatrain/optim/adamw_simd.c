// adamw_simd.c: the x86 AVX-512 and AVX2 AdamW kernels (Arm: adamw_arm.c), built
// with GCC target attributes (the project compiles for baseline x86-64) and chosen
// at run time.
// Each does exactly the ops of mt_adamw_elem, lane by lane, so results are
// bitwise those of the reference.
#if defined(__GNUC__) && !defined(__clang__)
// Contraction would fuse a*b+c differently from the reference; fused ops are explicit.
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "optim/adamw_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <stdint.h>

#define T512 __attribute__((target("avx512f,avx512bw")))
#define T256 __attribute__((target("avx2,fma")))
#define INL static inline __attribute__((always_inline))

// ---- AVX-512: 16 lanes; the tail uses masked loads and stores. ----

INL T512 __m512 ld512(const void *base, mt_dtype t, size_t i, __mmask16 k, int full) {
    if (t == MT_F32) {
        const float *f = (const float *)base + i;
        return full ? _mm512_loadu_ps(f) : _mm512_maskz_loadu_ps(k, f);
    }
    const uint16_t *h = (const uint16_t *)base + i;
    __m256i b = full ? _mm256_loadu_si256((const __m256i *)h)
                     : _mm512_castsi512_si256(_mm512_maskz_loadu_epi16((__mmask32)k, h));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
}

// Round to nearest even, NaN kept quiet: mt_f32_to_bf16 on 16 lanes.
INL T512 __m256i to_bf16_512(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, qnan);
    return _mm512_cvtepi32_epi16(r);
}

INL T512 void st512(void *base, mt_dtype t, size_t i, __m512 x, __mmask16 k, int full) {
    if (t == MT_F32) {
        float *f = (float *)base + i;
        if (full) _mm512_storeu_ps(f, x);
        else _mm512_mask_storeu_ps(f, k, x);
        return;
    }
    uint16_t *h = (uint16_t *)base + i;
    __m256i b = to_bf16_512(x);
    if (full) _mm256_storeu_si256((__m256i *)h, b);
    else _mm512_mask_storeu_epi16(h, (__mmask32)k, _mm512_castsi256_si512(b));
}

INL T512 void body512(const mt_adamw_args *a, size_t i, __mmask16 k, int full, mt_dtype pdt, mt_dtype gdt,
                      int has_master) {
    const mt_adamw_consts *c = &a->c;
    __m512 g = _mm512_mul_ps(ld512(a->g, gdt, i, k, full), _mm512_set1_ps(c->gscale));
    __m512 p = has_master ? ld512(a->master_in, MT_F32, i, k, full) : ld512(a->p_in, pdt, i, k, full);
    __m512 m = ld512(a->m_in, MT_F32, i, k, full);
    __m512 v = ld512(a->v_in, MT_F32, i, k, full);
    p = _mm512_mul_ps(p, _mm512_set1_ps(c->decay));
    m = _mm512_fmadd_ps(_mm512_set1_ps(c->lerp_w), _mm512_sub_ps(g, m), c->lerp_small ? m : g);
    v = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(c->c2), g), g, _mm512_mul_ps(v, _mm512_set1_ps(c->beta2)));
    __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), _mm512_set1_ps(c->bc2_sqrt)),
                                 _mm512_set1_ps(c->eps));
    p = _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(c->neg_step), m), denom));
    st512(a->m, MT_F32, i, m, k, full);
    st512(a->v, MT_F32, i, v, k, full);
    if (has_master) st512(a->master, MT_F32, i, p, k, full);
    st512(a->p, pdt, i, p, k, full);
}

INL T512 void loop512(const mt_adamw_args *a, size_t lo, size_t hi, mt_dtype pdt, mt_dtype gdt, int has_master) {
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) body512(a, i, 0xffff, 1, pdt, gdt, has_master);
    if (i < hi) body512(a, i, (__mmask16)((1u << (hi - i)) - 1), 0, pdt, gdt, has_master);
}

T512 void mt_adamw_kernel_avx512(const mt_adamw_args *a, size_t lo, size_t hi) {
    // One specialisation per precision mode, so the dtype branches fold away.
    if (a->master) {
        if (a->gdt == MT_BF16) loop512(a, lo, hi, a->pdt == MT_BF16 ? MT_BF16 : MT_F32, MT_BF16, 1);
        else loop512(a, lo, hi, a->pdt == MT_BF16 ? MT_BF16 : MT_F32, MT_F32, 1);
    } else if (a->pdt == MT_F32) {
        if (a->gdt == MT_F32) loop512(a, lo, hi, MT_F32, MT_F32, 0);
        else loop512(a, lo, hi, MT_F32, MT_BF16, 0);
    } else {
        if (a->gdt == MT_F32) loop512(a, lo, hi, MT_BF16, MT_F32, 0);
        else loop512(a, lo, hi, MT_BF16, MT_BF16, 0);
    }
}

// ---- AVX2 + FMA: 8 lanes; the tail runs mt_adamw_elem (same ops, scalar). ----

INL T256 __m256 ld256(const void *base, mt_dtype t, size_t i) {
    if (t == MT_F32) return _mm256_loadu_ps((const float *)base + i);
    __m128i b = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
}

INL T256 void st256(void *base, mt_dtype t, size_t i, __m256 x) {
    if (t == MT_F32) {
        _mm256_storeu_ps((float *)base + i, x);
        return;
    }
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, qnan, nan);
    // Values fit in 16 bits, so the saturating pack is exact; the permute undoes its lane interleave.
    __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128((__m128i *)((uint16_t *)base + i), _mm256_castsi256_si128(pk));
}

INL T256 void loop256(const mt_adamw_args *a, size_t lo, size_t hi, mt_dtype pdt, mt_dtype gdt, int has_master) {
    const mt_adamw_consts *c = &a->c;
    const __m256 gscale = _mm256_set1_ps(c->gscale), decay = _mm256_set1_ps(c->decay);
    const __m256 lerp_w = _mm256_set1_ps(c->lerp_w), c2 = _mm256_set1_ps(c->c2), beta2 = _mm256_set1_ps(c->beta2);
    const __m256 bc2s = _mm256_set1_ps(c->bc2_sqrt), eps = _mm256_set1_ps(c->eps);
    const __m256 neg_step = _mm256_set1_ps(c->neg_step);
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m256 g = _mm256_mul_ps(ld256(a->g, gdt, i), gscale);
        __m256 p = has_master ? ld256(a->master_in, MT_F32, i) : ld256(a->p_in, pdt, i);
        __m256 m = ld256(a->m_in, MT_F32, i);
        __m256 v = ld256(a->v_in, MT_F32, i);
        p = _mm256_mul_ps(p, decay);
        m = _mm256_fmadd_ps(lerp_w, _mm256_sub_ps(g, m), c->lerp_small ? m : g);
        v = _mm256_fmadd_ps(_mm256_mul_ps(c2, g), g, _mm256_mul_ps(v, beta2));
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bc2s), eps);
        p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(neg_step, m), denom));
        st256(a->m, MT_F32, i, m);
        st256(a->v, MT_F32, i, v);
        if (has_master) st256(a->master, MT_F32, i, p);
        st256(a->p, pdt, i, p);
    }
    for (; i < hi; i++) {
        float pi = has_master ? a->master_in[i] : mt_load_f32(a->p_in, pdt, i);
        float out = mt_adamw_elem(pi, mt_load_f32(a->g, gdt, i), a->m_in[i], a->v_in[i], &a->m[i], &a->v[i], c);
        if (has_master) a->master[i] = out;
        mt_store_f32(a->p, pdt, i, out);
    }
}

T256 void mt_adamw_kernel_avx2(const mt_adamw_args *a, size_t lo, size_t hi) {
    if (a->master) {
        if (a->gdt == MT_BF16) loop256(a, lo, hi, a->pdt == MT_BF16 ? MT_BF16 : MT_F32, MT_BF16, 1);
        else loop256(a, lo, hi, a->pdt == MT_BF16 ? MT_BF16 : MT_F32, MT_F32, 1);
    } else if (a->pdt == MT_F32) {
        if (a->gdt == MT_F32) loop256(a, lo, hi, MT_F32, MT_F32, 0);
        else loop256(a, lo, hi, MT_F32, MT_BF16, 0);
    } else {
        if (a->gdt == MT_F32) loop256(a, lo, hi, MT_BF16, MT_F32, 0);
        else loop256(a, lo, hi, MT_BF16, MT_BF16, 0);
    }
}

#endif
