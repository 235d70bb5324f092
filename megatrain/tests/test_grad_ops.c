// test_grad_ops.c: gradient accumulate / sum of squares / scale against scalar
// references, on every path this CPU runs (generic C, and on aarch64 NEON and SVE),
// and sumsq bitwise independent of the OpenMP thread count and of the path.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "optim/grad_ops.h"
#include "optim/grad_ops_isa.h"
#include "test_util.h"

static const size_t NS[] = {0, 1, 7, 64, 1000, 65535, 65536, 65537, 200003, 1000001};

static void test_accumulate(mt_simd_isa isa, mt_dtype t, size_t n) {
    size_t cnt = n ? n : 1;
    float *a = malloc(cnt * 4), *b = malloc(cnt * 4), *c = malloc(cnt * 4);
    void *dst = malloc(cnt * 4), *src = malloc(cnt * 4), *src2 = malloc(cnt * 4);
    mt_test_fill_uniform(a, n, 11 + n, -3, 3);
    mt_test_fill_uniform(b, n, 12 + n, -3, 3);
    mt_test_fill_uniform(c, n, 13 + n, -1e-3f, 1e-3f);
    mt_convert(src, t, a, MT_F32, n);
    mt_convert(src2, t, b, MT_F32, n);
    // first: plain copy; then two accumulations.
    mt_grad_accumulate_isa(isa, dst, src, t, n, 1);
    CHECK(!memcmp(dst, src, n * mt_dtype_size(t)), "[%s] accumulate(first) must copy: %s n=%zu", mt_simd_name(isa), mt_dtype_name(t), n);
    mt_grad_accumulate_isa(isa, dst, src2, t, n, 0);
    mt_convert(src2, t, c, MT_F32, n);
    mt_grad_accumulate_isa(isa, dst, src2, t, n, 0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        // Reference: f32 add of the stored values, rounded to t after each accumulation.
        float x = mt_load_f32(src, t, i);
        float y;
        if (t == MT_F32) y = (x + b[i]) + c[i];
        else {
            float s1 = mt_bf16_to_f32(mt_f32_to_bf16(x + mt_bf16_to_f32(mt_f32_to_bf16(b[i]))));
            y = mt_bf16_to_f32(mt_f32_to_bf16(s1 + mt_bf16_to_f32(mt_f32_to_bf16(c[i]))));
        }
        float got = mt_load_f32(dst, t, i);
        bad += memcmp(&got, &y, 4) != 0;
    }
    CHECK(bad == 0, "[%s] accumulate %s n=%zu: %zu elements differ from the scalar reference", mt_simd_name(isa),
          mt_dtype_name(t), n, bad);
    free(a), free(b), free(c), free(dst), free(src), free(src2);
}

static void test_sumsq(mt_simd_isa isa, mt_dtype t, size_t n) {
    size_t cnt = n ? n : 1;
    float *a = malloc(cnt * 4);
    void *x = malloc(cnt * 4);
    mt_test_fill_uniform(a, n, 21 + n, -2, 2);
    if (n > 5) a[5] = 1e30f; // squares beyond f32 range must not overflow (double accumulation)
    mt_convert(x, t, a, MT_F32, n);
    double ref = 0;
    for (size_t i = 0; i < n; i++) {
        double f = mt_load_f32(x, t, i);
        ref += f * f;
    }
    omp_set_num_threads(1);
    double s1 = mt_grad_sumsq_isa(isa, x, t, n);
    omp_set_num_threads(2);
    double s2 = mt_grad_sumsq_isa(isa, x, t, n);
    omp_set_num_threads(3);
    double s3 = mt_grad_sumsq_isa(isa, x, t, n);
    double sg = mt_grad_sumsq_isa(MT_SIMD_SCALAR, x, t, n);
    CHECK(fabs(s2 - ref) <= 1e-12 * ref, "[%s] sumsq %s n=%zu: %.17g vs reference %.17g", mt_simd_name(isa),
          mt_dtype_name(t), n, s2, ref);
    CHECK(!memcmp(&s1, &s2, sizeof s1) && !memcmp(&s1, &s3, sizeof s1),
          "[%s] sumsq %s n=%zu depends on thread count: 1:%.17g 2:%.17g 3:%.17g", mt_simd_name(isa), mt_dtype_name(t),
          n, s1, s2, s3);
    CHECK(!memcmp(&s3, &sg, sizeof sg), "[%s] sumsq %s n=%zu: %.17g, the generic loop %.17g (same order, same bits)",
          mt_simd_name(isa), mt_dtype_name(t), n, s3, sg);
    free(a), free(x);
}

static void test_scale(mt_simd_isa isa, mt_dtype t, size_t n) {
    size_t cnt = n ? n : 1;
    float *a = malloc(cnt * 4);
    void *x = malloc(cnt * 4);
    mt_test_fill_uniform(a, n, 31 + n, -2, 2);
    mt_convert(x, t, a, MT_F32, n);
    mt_grad_scale_isa(isa, x, t, n, 0.3f);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = t == MT_F32 ? a[i] * 0.3f : mt_bf16_to_f32(mt_f32_to_bf16(mt_bf16_to_f32(mt_f32_to_bf16(a[i])) * 0.3f));
        float got = mt_load_f32(x, t, i);
        bad += memcmp(&got, &want, 4) != 0;
    }
    CHECK(bad == 0, "[%s] scale %s n=%zu: %zu elements differ", mt_simd_name(isa), mt_dtype_name(t), n, bad);
    free(a), free(x);
}

// bf16 rounding corner cases through accumulate (ties to even, NaN stays NaN, overflow to inf).
static void test_bf16_corners(mt_simd_isa isa) {
    uint16_t d[4] = {mt_f32_to_bf16(1.0f), mt_f32_to_bf16(1.0f), 0x7fc0, mt_f32_to_bf16(3.0e38f)};
    // 1 + 2^-8 is a tie between 1 and 1+2^-7: even is 1. 1 + 3*2^-8 ties up to 1 + 2^-6.
    uint16_t s[4] = {mt_f32_to_bf16(0.00390625f), mt_f32_to_bf16(0.01171875f), mt_f32_to_bf16(1.0f),
                     mt_f32_to_bf16(3.0e38f)};
    mt_grad_accumulate_isa(isa, d, s, MT_BF16, 4, 0);
    const char *nm = mt_simd_name(isa);
    CHECK(mt_bf16_to_f32(d[0]) == 1.0f, "[%s] tie rounds to even: got %g", nm, (double)mt_bf16_to_f32(d[0]));
    CHECK(mt_bf16_to_f32(d[1]) == 1.015625f, "[%s] tie rounds to even (up): got %.9g", nm, (double)mt_bf16_to_f32(d[1]));
    CHECK(isnan(mt_bf16_to_f32(d[2])), "[%s] NaN stays NaN", nm);
    CHECK(isinf(mt_bf16_to_f32(d[3])), "[%s] overflow gives inf", nm);
}

int main(void) {
    int saved = omp_get_max_threads();
    char ran[64] = "";
    for (int isa = 0; isa < MT_SIMD_COUNT; isa++) {
        // x86's AVX paths run the same cloned generic kernels as "scalar": nothing more to test.
        if (!mt_simd_supported((mt_simd_isa)isa) || isa == MT_SIMD_AVX2 || isa == MT_SIMD_AVX512) continue;
        for (size_t i = 0; i < sizeof NS / sizeof NS[0]; i++)
            for (int t = 0; t < 2; t++) {
                test_accumulate((mt_simd_isa)isa, (mt_dtype)t, NS[i]);
                test_sumsq((mt_simd_isa)isa, (mt_dtype)t, NS[i]);
                test_scale((mt_simd_isa)isa, (mt_dtype)t, NS[i]);
            }
        test_bf16_corners((mt_simd_isa)isa);
        snprintf(ran + strlen(ran), sizeof ran - strlen(ran), "%s%s", ran[0] ? "," : "", mt_simd_name((mt_simd_isa)isa));
    }
    fprintf(stderr, "test_grad_ops: paths %s tested (dispatch picks %s)\n", ran, mt_simd_name(mt_simd_best()));
    // Over one 1024-block round of sumsq (64 Mi elements) so the round loop runs twice.
    {
        size_t n = ((size_t)64 << 20) + 12345;
        float *x = malloc(n * 4);
        if (x) {
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
            double ref = 0;
            for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
            omp_set_num_threads(1);
            double s1 = mt_grad_sumsq(x, MT_F32, n);
            omp_set_num_threads(2);
            double s2 = mt_grad_sumsq(x, MT_F32, n);
            CHECK(!memcmp(&s1, &s2, sizeof s1), "large sumsq depends on thread count: %.17g vs %.17g", s1, s2);
            CHECK(fabs(s1 - ref) <= 1e-10 * ref, "large sumsq %.17g vs reference %.17g", s1, ref);
            free(x);
        }
    }
    omp_set_num_threads(saved);
    return mt_test_finish("test_grad_ops");
}
