// test_cpu_ops.c: every cpu backend kernel against a plain double-precision
// reference written out here (attention with the full score matrix), by
// normalized MSE with a per-op limit; bf16 weights against f32 weights rounded
// to bf16; MT_ACC flags; in-place use; thread-count independence; the
// registry and the memory/event entries; a T=16384 attention timing.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "test_util.h"

static mt_backend *be;

#define OK(expr)                                                                                                \
    do {                                                                                                        \
        mt_status ok_s_ = (expr);                                                                               \
        CHECK(ok_s_ == MT_OK, "%s returned %s: %s\nHINT: the kernel rejected its arguments", #expr,             \
              mt_status_name(ok_s_), mt_last_error());                                                          \
    } while (0)

// Limits on normalized MSE of f32 kernels against double references.
#define LIM_EXACTISH 1e-12 // pure data movement / one rounding
#define LIM_F32 1e-10      // short f32 reductions
#define LIM_ATT 1e-9       // softmax + two contractions

static unsigned long long seed_ctr = 1;

static float *rnd(size_t n, float lo, float hi) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    mt_test_fill_uniform(x, n, seed_ctr++, lo, hi);
    return x;
}

static float *dup(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

// Double reference -> float array for mt_test_nmse.
static float *tof(const double *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    return y;
}

static double *dzeros(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static void expect_close(const char *what, const float *got, const double *ref, size_t n, double lim) {
    float *r = tof(ref, n);
    double e = mt_test_nmse(got, r, n);
    CHECK(e <= lim, "%s: nmse %.3g > %.3g\nHINT: compare the kernel with the reference in this test", what, e, lim);
    free(r);
}

static void expect_same(const char *what, const void *a, const void *b, size_t bytes) {
    CHECK(memcmp(a, b, bytes) == 0, "%s: results differ bitwise\nHINT: a reduction order depends on threads or path",
          what);
}

static uint16_t *to_bf16(const float *x, size_t n) {
    uint16_t *y = malloc((n ? n : 1) * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = mt_f32_to_bf16(x[i]);
    return y;
}

static float *round_bf16(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = mt_bf16_to_f32(mt_f32_to_bf16(x[i]));
    return y;
}

// ---------------------------------------------------------------- matmul

static void test_matmul(int N, int IC, int OC) {
    float *inp = rnd((size_t)N * IC, -1, 1), *w = rnd((size_t)OC * IC, -1, 1), *bias = rnd(OC, -1, 1);
    float *dout = rnd((size_t)N * OC, -1, 1);
    float *out = malloc(sizeof(float) * N * OC), *out_nb = malloc(sizeof(float) * N * OC);
    double *ro = dzeros((size_t)N * OC), *ro_nb = dzeros((size_t)N * OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0;
            for (int i = 0; i < IC; i++) s += (double)inp[n * IC + i] * w[o * IC + i];
            ro_nb[n * OC + o] = s;
            ro[n * OC + o] = s + bias[o];
        }
    OK(be->ops->matmul_fwd(be, out, inp, w, bias, MT_F32, N, IC, OC));
    OK(be->ops->matmul_fwd(be, out_nb, inp, w, NULL, MT_F32, N, IC, OC));
    expect_close("matmul_fwd bias", out, ro, (size_t)N * OC, LIM_F32);
    expect_close("matmul_fwd no bias", out_nb, ro_nb, (size_t)N * OC, LIM_F32);

    double *rdi = dzeros((size_t)N * IC), *rdw = dzeros((size_t)OC * IC), *rdb = dzeros(OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double g = dout[n * OC + o];
            rdb[o] += g;
            for (int i = 0; i < IC; i++) {
                rdi[n * IC + i] += g * w[o * IC + i];
                rdw[o * IC + i] += g * inp[n * IC + i];
            }
        }
    float *dinp = rnd((size_t)N * IC, -1, 1), *dw = rnd((size_t)OC * IC, -1, 1), *db = rnd(OC, -1, 1);
    OK(be->ops->matmul_bwd(be, dinp, dw, db, dout, inp, w, MT_F32, N, IC, OC, 0));
    expect_close("matmul_bwd dinp", dinp, rdi, (size_t)N * IC, LIM_F32);
    expect_close("matmul_bwd dw", dw, rdw, (size_t)OC * IC, LIM_F32);
    expect_close("matmul_bwd dbias", db, rdb, OC, LIM_F32);

    // Accumulate flags: prefilled buffers get the gradient added; dinp NULL is skipped.
    float *pi = rnd((size_t)N * IC, -1, 1), *pw = rnd((size_t)OC * IC, -1, 1), *pb = rnd(OC, -1, 1);
    float *ai = dup(pi, (size_t)N * IC), *aw = dup(pw, (size_t)OC * IC), *ab = dup(pb, OC);
    double *ei = dzeros((size_t)N * IC), *ew = dzeros((size_t)OC * IC), *eb = dzeros(OC);
    for (size_t i = 0; i < (size_t)N * IC; i++) ei[i] = pi[i] + rdi[i];
    for (size_t i = 0; i < (size_t)OC * IC; i++) ew[i] = pw[i] + rdw[i];
    for (int o = 0; o < OC; o++) eb[o] = pb[o] + rdb[o];
    OK(be->ops->matmul_bwd(be, ai, aw, ab, dout, inp, w, MT_F32, N, IC, OC, MT_ACC_DINP | MT_ACC_DW));
    expect_close("matmul_bwd acc dinp", ai, ei, (size_t)N * IC, LIM_F32);
    expect_close("matmul_bwd acc dw", aw, ew, (size_t)OC * IC, LIM_F32);
    expect_close("matmul_bwd acc dbias", ab, eb, OC, LIM_F32);
    memcpy(aw, pw, sizeof(float) * OC * IC);
    memcpy(ai, pi, sizeof(float) * N * IC);
    OK(be->ops->matmul_bwd(be, ai, aw, NULL, dout, inp, w, MT_F32, N, IC, OC, MT_ACC_DW)); // dinp overwritten
    expect_close("matmul_bwd acc dw only: dinp", ai, rdi, (size_t)N * IC, LIM_F32);
    expect_close("matmul_bwd acc dw only: dw", aw, ew, (size_t)OC * IC, LIM_F32);
    memcpy(aw, pw, sizeof(float) * OC * IC);
    OK(be->ops->matmul_bwd(be, NULL, aw, NULL, dout, inp, w, MT_F32, N, IC, OC, 0));
    expect_close("matmul_bwd dinp NULL: dw", aw, rdw, (size_t)OC * IC, LIM_F32);

    // bf16 weights == f32 weights rounded to bf16; bf16 grads == f32 grads rounded once.
    uint16_t *wb = to_bf16(w, (size_t)OC * IC), *bb = to_bf16(bias, OC);
    float *wr = round_bf16(w, (size_t)OC * IC), *br = round_bf16(bias, OC);
    float *o16 = malloc(sizeof(float) * N * OC), *o32 = malloc(sizeof(float) * N * OC);
    OK(be->ops->matmul_fwd(be, o16, inp, wb, bb, MT_BF16, N, IC, OC));
    OK(be->ops->matmul_fwd(be, o32, inp, wr, br, MT_F32, N, IC, OC));
    expect_same("matmul_fwd bf16 weights", o16, o32, sizeof(float) * N * OC);
    uint16_t *dwb = to_bf16(pw, (size_t)OC * IC), *dbb = to_bf16(pb, OC);
    float *dw32 = round_bf16(pw, (size_t)OC * IC), *db32 = round_bf16(pb, OC);
    float *di16 = dup(pi, (size_t)N * IC), *di32 = dup(pi, (size_t)N * IC);
    OK(be->ops->matmul_bwd(be, di16, dwb, dbb, dout, inp, wb, MT_BF16, N, IC, OC, MT_ACC_DW | MT_ACC_DINP));
    OK(be->ops->matmul_bwd(be, di32, dw32, db32, dout, inp, wr, MT_F32, N, IC, OC, MT_ACC_DW | MT_ACC_DINP));
    expect_same("matmul_bwd bf16 dinp", di16, di32, sizeof(float) * N * IC);
    uint16_t *dw32b = to_bf16(dw32, (size_t)OC * IC), *db32b = to_bf16(db32, OC);
    expect_same("matmul_bwd bf16 acc dw", dwb, dw32b, sizeof(uint16_t) * OC * IC);
    expect_same("matmul_bwd bf16 acc dbias", dbb, db32b, sizeof(uint16_t) * OC);
    OK(be->ops->matmul_bwd(be, NULL, dwb, dbb, dout, inp, wb, MT_BF16, N, IC, OC, 0));
    float *rdwf = tof(rdw, (size_t)OC * IC);
    float *dwb_f = malloc(sizeof(float) * OC * IC);
    for (size_t i = 0; i < (size_t)OC * IC; i++) dwb_f[i] = mt_bf16_to_f32(dwb[i]);
    CHECK(mt_test_nmse(dwb_f, rdwf, (size_t)OC * IC) < 1e-5, "matmul_bwd bf16 dw far from reference");

    free(inp); free(w); free(bias); free(dout); free(out); free(out_nb); free(ro); free(ro_nb);
    free(rdi); free(rdw); free(rdb); free(dinp); free(dw); free(db); free(pi); free(pw); free(pb);
    free(ai); free(aw); free(ab); free(ei); free(ew); free(eb); free(wb); free(bb); free(wr); free(br);
    free(o16); free(o32); free(dwb); free(dbb); free(dw32); free(db32); free(di16); free(di32);
    free(dw32b); free(db32b); free(rdwf); free(dwb_f);
}

// ---------------------------------------------------------------- rmsnorm

static void ref_rms_row(double *y, double *rstd, const float *x, const float *w, int D, double eps) {
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)x[i] * x[i];
    double r = 1.0 / sqrt(ss / D + eps);
    for (int i = 0; i < D; i++) y[i] = x[i] * r * w[i];
    *rstd = r;
}

// dx and dw (accumulated) of one row, from the analytic formula.
static void ref_rms_row_bwd(double *dx, double *dw, const float *g, const float *x, const float *w, int D,
                            double eps) {
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)x[i] * x[i];
    double r = 1.0 / sqrt(ss / D + eps), dot = 0;
    for (int i = 0; i < D; i++) dot += (double)g[i] * w[i] * x[i];
    for (int k = 0; k < D; k++) {
        dx[k] = r * w[k] * g[k] - r * r * r * x[k] * dot / D;
        dw[k] += (double)g[k] * x[k] * r;
    }
}

static void test_rmsnorm(int R, int D) {
    float eps = 1e-5f;
    float *x = rnd((size_t)R * D, -2, 2), *w = rnd(D, 0.5f, 1.5f), *g = rnd((size_t)R * D, -1, 1);
    float *y = malloc(sizeof(float) * R * D), *rstd = malloc(sizeof(float) * R);
    double *ry = dzeros((size_t)R * D), *rr = dzeros(R), *rdx = dzeros((size_t)R * D), *rdw = dzeros(D);
    for (int r = 0; r < R; r++) {
        ref_rms_row(ry + (size_t)r * D, rr + r, x + (size_t)r * D, w, D, eps);
        ref_rms_row_bwd(rdx + (size_t)r * D, rdw, g + (size_t)r * D, x + (size_t)r * D, w, D, eps);
    }
    OK(be->ops->rmsnorm_fwd(be, y, rstd, x, w, MT_F32, R, D, eps));
    expect_close("rmsnorm_fwd out", y, ry, (size_t)R * D, LIM_F32);
    expect_close("rmsnorm_fwd rstd", rstd, rr, R, LIM_F32);
    float *dx = malloc(sizeof(float) * R * D), *dw = rnd(D, -1, 1);
    OK(be->ops->rmsnorm_bwd(be, dx, dw, g, x, w, rstd, MT_F32, R, D));
    expect_close("rmsnorm_bwd dinp", dx, rdx, (size_t)R * D, LIM_F32);
    expect_close("rmsnorm_bwd dw", dw, rdw, D, LIM_F32);

    // in place: out == inp, dinp == dout
    float *xi = dup(x, (size_t)R * D), *gi = dup(g, (size_t)R * D), *dw2 = malloc(sizeof(float) * D);
    OK(be->ops->rmsnorm_fwd(be, xi, rstd, xi, w, MT_F32, R, D, eps));
    expect_same("rmsnorm_fwd in place", xi, y, sizeof(float) * R * D);
    OK(be->ops->rmsnorm_bwd(be, gi, dw2, gi, x, w, rstd, MT_F32, R, D));
    expect_same("rmsnorm_bwd in place", gi, dx, sizeof(float) * R * D);

    // bf16 weight and weight grad
    uint16_t *wb = to_bf16(w, D), *dwb = malloc(sizeof(uint16_t) * D);
    float *wr = round_bf16(w, D), *y16 = malloc(sizeof(float) * R * D), *y32 = malloc(sizeof(float) * R * D);
    float *dx16 = malloc(sizeof(float) * R * D), *dx32 = malloc(sizeof(float) * R * D), *dw32 = malloc(sizeof(float) * D);
    OK(be->ops->rmsnorm_fwd(be, y16, rstd, x, wb, MT_BF16, R, D, eps));
    OK(be->ops->rmsnorm_fwd(be, y32, rstd, x, wr, MT_F32, R, D, eps));
    expect_same("rmsnorm_fwd bf16 w", y16, y32, sizeof(float) * R * D);
    OK(be->ops->rmsnorm_bwd(be, dx16, dwb, g, x, wb, rstd, MT_BF16, R, D));
    OK(be->ops->rmsnorm_bwd(be, dx32, dw32, g, x, wr, rstd, MT_F32, R, D));
    expect_same("rmsnorm_bwd bf16 dinp", dx16, dx32, sizeof(float) * R * D);
    uint16_t *dw32b = to_bf16(dw32, D);
    expect_same("rmsnorm_bwd bf16 dw", dwb, dw32b, sizeof(uint16_t) * D);

    free(x); free(w); free(g); free(y); free(rstd); free(ry); free(rr); free(rdx); free(rdw); free(dx); free(dw);
    free(xi); free(gi); free(dw2); free(wb); free(dwb); free(wr); free(y16); free(y32); free(dx16); free(dx32);
    free(dw32); free(dw32b);
}

// The fused residual forms give the unfused pair's values: add_rmsnorm_fwd = add then
// rmsnorm_fwd, rmsnorm_bwd_add = rmsnorm_bwd into a temporary then add (bitwise on x86-64,
// where nothing contracts a*b+c into an FMA); the pair itself is checked above.
static void test_fused_residual_norm(int R, int D) {
    float eps = 1e-5f;
    size_t n = (size_t)R * D;
    float *a = rnd(n, -2, 2), *b = rnd(n, -2, 2), *w = rnd(D, 0.5f, 1.5f), *g = rnd(n, -1, 1), *acc = rnd(n, -1, 1);
    float *sum1 = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n), *rs1 = malloc(sizeof(float) * R);
    float *y2 = malloc(sizeof(float) * n), *rs2 = malloc(sizeof(float) * R), *sum2 = dup(a, n);
    OK(be->ops->add(be, sum1, a, b, n));
    OK(be->ops->rmsnorm_fwd(be, y1, rs1, sum1, w, MT_F32, R, D, eps));
    OK(be->ops->add_rmsnorm_fwd(be, sum2, y2, rs2, sum2, b, w, MT_F32, R, D, eps)); // sum aliases a, as layer.c
    float *dx1 = malloc(sizeof(float) * n), *dw1 = malloc(sizeof(float) * D), *dw2 = rnd(D, -1, 1);
    float *acc1 = dup(acc, n), *acc2 = dup(acc, n);
    OK(be->ops->rmsnorm_bwd(be, dx1, dw1, g, sum1, w, rs1, MT_F32, R, D));
    OK(be->ops->add(be, acc1, acc1, dx1, n));
    OK(be->ops->rmsnorm_bwd_add(be, acc2, dw2, g, sum1, w, rs1, MT_F32, R, D));
#if defined(__x86_64__)
    expect_same("add_rmsnorm_fwd sum", sum2, sum1, sizeof(float) * n);
    expect_same("add_rmsnorm_fwd out", y2, y1, sizeof(float) * n);
    expect_same("add_rmsnorm_fwd rstd", rs2, rs1, sizeof(float) * R);
    expect_same("rmsnorm_bwd_add dacc", acc2, acc1, sizeof(float) * n);
    expect_same("rmsnorm_bwd_add dw", dw2, dw1, sizeof(float) * D);
#else
    CHECK(mt_test_nmse(y2, y1, n) < 1e-12 && mt_test_nmse(acc2, acc1, n) < 1e-12 && mt_test_nmse(dw2, dw1, D) < 1e-12,
          "fused residual norms differ from the unfused pair");
#endif
    CHECK(be->ops->rmsnorm_bwd_add(be, acc2, dw2, acc2, sum1, w, rs1, MT_F32, R, D) == MT_ERR_ARG,
          "rmsnorm_bwd_add refuses dacc aliasing dout");
    free(a); free(b); free(w); free(g); free(acc); free(sum1); free(y1); free(rs1); free(y2); free(rs2); free(sum2);
    free(dx1); free(dw1); free(dw2); free(acc1); free(acc2);
}

// ---------------------------------------------------------------- qk_norm

static void test_qk_norm(int N, int NH, int NKV, int HD) {
    float eps = 1e-6f;
    int QKV = NH + 2 * NKV, NQK = NH + NKV;
    size_t n = (size_t)N * QKV * HD;
    float *x = rnd(n, -2, 2), *qw = rnd(HD, 0.5f, 1.5f), *kw = rnd(HD, 0.5f, 1.5f), *g = rnd(n, -1, 1);
    double *ry = dzeros(n), *rr = dzeros((size_t)N * NQK), *rdx = dzeros(n), *rdq = dzeros(HD), *rdk = dzeros(HD);
    for (int t = 0; t < N; t++)
        for (int h = 0; h < QKV; h++) {
            size_t o = ((size_t)t * QKV + h) * HD;
            if (h < NQK) {
                const float *w = h < NH ? qw : kw;
                ref_rms_row(ry + o, rr + (size_t)t * NQK + h, x + o, w, HD, eps);
                ref_rms_row_bwd(rdx + o, h < NH ? rdq : rdk, g + o, x + o, w, HD, eps);
            } else {
                for (int d = 0; d < HD; d++) {
                    ry[o + d] = x[o + d];
                    rdx[o + d] = g[o + d];
                }
            }
        }
    float *y = malloc(sizeof(float) * n), *rstd = malloc(sizeof(float) * N * NQK);
    OK(be->ops->qk_norm_fwd(be, y, rstd, x, qw, kw, MT_F32, N, NH, NKV, HD, eps));
    expect_close("qk_norm_fwd out", y, ry, n, LIM_F32);
    expect_close("qk_norm_fwd rstd", rstd, rr, (size_t)N * NQK, LIM_F32);
    float *dx = malloc(sizeof(float) * n), *dq = malloc(sizeof(float) * HD), *dk = malloc(sizeof(float) * HD);
    OK(be->ops->qk_norm_bwd(be, dx, dq, dk, g, x, qw, kw, rstd, MT_F32, N, NH, NKV, HD));
    expect_close("qk_norm_bwd dinp", dx, rdx, n, LIM_F32);
    expect_close("qk_norm_bwd dqw", dq, rdq, HD, LIM_F32);
    expect_close("qk_norm_bwd dkw", dk, rdk, HD, LIM_F32);

    uint16_t *qb = to_bf16(qw, HD), *kb = to_bf16(kw, HD), *dqb = malloc(2 * HD), *dkb = malloc(2 * HD);
    float *qr = round_bf16(qw, HD), *kr = round_bf16(kw, HD);
    float *y16 = malloc(sizeof(float) * n), *y32 = malloc(sizeof(float) * n);
    OK(be->ops->qk_norm_fwd(be, y16, rstd, x, qb, kb, MT_BF16, N, NH, NKV, HD, eps));
    OK(be->ops->qk_norm_fwd(be, y32, rstd, x, qr, kr, MT_F32, N, NH, NKV, HD, eps));
    expect_same("qk_norm_fwd bf16 w", y16, y32, sizeof(float) * n);
    OK(be->ops->qk_norm_bwd(be, y16, dqb, dkb, g, x, qb, kb, rstd, MT_BF16, N, NH, NKV, HD));
    OK(be->ops->qk_norm_bwd(be, y32, dq, dk, g, x, qr, kr, rstd, MT_F32, N, NH, NKV, HD));
    expect_same("qk_norm_bwd bf16 dinp", y16, y32, sizeof(float) * n);
    uint16_t *dqr = to_bf16(dq, HD), *dkr = to_bf16(dk, HD);
    expect_same("qk_norm_bwd bf16 dqw", dqb, dqr, 2 * (size_t)HD);
    expect_same("qk_norm_bwd bf16 dkw", dkb, dkr, 2 * (size_t)HD);

    free(x); free(qw); free(kw); free(g); free(ry); free(rr); free(rdx); free(rdq); free(rdk); free(y); free(rstd);
    free(dx); free(dq); free(dk); free(qb); free(kb); free(dqb); free(dkb); free(qr); free(kr); free(y16); free(y32);
    free(dqr); free(dkr);
}

// ---------------------------------------------------------------- rope

static void rope_tables(float *cs, float *sn, int T, int HD) {
    int half = HD / 2;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < half; j++) {
            double f = t * pow(10000.0, -2.0 * j / HD);
            cs[t * half + j] = (float)cos(f);
            sn[t * half + j] = (float)sin(f);
        }
}

static void test_rope(int B, int T, int NH, int NKV, int HD) {
    int QKV = NH + 2 * NKV, half = HD / 2;
    size_t n = (size_t)B * T * QKV * HD;
    float *cs = malloc(sizeof(float) * T * half), *sn = malloc(sizeof(float) * T * half);
    rope_tables(cs, sn, T, HD);
    float *x = rnd(n, -1, 1), *g = rnd(n, -1, 1);
    double *ry = dzeros(n), *rdx = dzeros(n);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < QKV; h++) {
                size_t o = (((size_t)b * T + t) * QKV + h) * HD;
                for (int j = 0; j < half; j++) {
                    double c = cs[t * half + j], s = sn[t * half + j];
                    if (h < NH + NKV) {
                        ry[o + j] = x[o + j] * c - x[o + j + half] * s;
                        ry[o + j + half] = x[o + j + half] * c + x[o + j] * s;
                        // transpose of the rotation
                        rdx[o + j] = g[o + j] * c + g[o + j + half] * s;
                        rdx[o + j + half] = g[o + j + half] * c - g[o + j] * s;
                    } else {
                        ry[o + j] = x[o + j];
                        ry[o + j + half] = x[o + j + half];
                        rdx[o + j] = g[o + j];
                        rdx[o + j + half] = g[o + j + half];
                    }
                }
            }
    float *y = malloc(sizeof(float) * n), *dx = malloc(sizeof(float) * n);
    OK(be->ops->rope_fwd(be, y, x, cs, sn, B, T, NH, NKV, HD));
    expect_close("rope_fwd", y, ry, n, LIM_F32);
    OK(be->ops->rope_bwd(be, dx, g, cs, sn, B, T, NH, NKV, HD));
    expect_close("rope_bwd", dx, rdx, n, LIM_F32);
    float *xi = dup(x, n), *gi = dup(g, n);
    OK(be->ops->rope_fwd(be, xi, xi, cs, sn, B, T, NH, NKV, HD));
    expect_same("rope_fwd in place", xi, y, sizeof(float) * n);
    OK(be->ops->rope_bwd(be, gi, gi, cs, sn, B, T, NH, NKV, HD));
    expect_same("rope_bwd in place", gi, dx, sizeof(float) * n);
    free(cs); free(sn); free(x); free(g); free(ry); free(rdx); free(y); free(dx); free(xi); free(gi);
}

// ---------------------------------------------------------------- attention

// Full-matrix double reference for one (b, h): out, lse and the contributions
// to dq, dk, dv (added into packed dqkv).
static void ref_attention(double *out, double *lse, double *dqkv, const float *qkv, const float *dout, int B, int T,
                          int NH, int NKV, int HD) {
    int QKV = NH + 2 * NKV, G = NH / NKV;
    double scale = 1.0 / sqrt((double)HD);
    double *P = malloc(sizeof(double) * T * T), *dP = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kvh = h / G;
#define Q(t, d) qkv[(((size_t)b * T + (t)) * QKV + h) * HD + (d)]
#define K(t, d) qkv[(((size_t)b * T + (t)) * QKV + NH + kvh) * HD + (d)]
#define V(t, d) qkv[(((size_t)b * T + (t)) * QKV + NH + NKV + kvh) * HD + (d)]
#define DO(t, d) dout[(((size_t)b * T + (t)) * NH + h) * HD + (d)]
#define DQ(t, d) dqkv[(((size_t)b * T + (t)) * QKV + h) * HD + (d)]
#define DK(t, d) dqkv[(((size_t)b * T + (t)) * QKV + NH + kvh) * HD + (d)]
#define DV(t, d) dqkv[(((size_t)b * T + (t)) * QKV + NH + NKV + kvh) * HD + (d)]
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < HD; d++) s += (double)Q(i, d) * K(j, d);
                    P[(size_t)i * T + j] = s * scale;
                    if (s * scale > mx) mx = s * scale;
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) sum += exp(P[(size_t)i * T + j] - mx);
                for (int j = 0; j <= i; j++) P[(size_t)i * T + j] = exp(P[(size_t)i * T + j] - mx) / sum;
                lse[((size_t)b * NH + h) * T + i] = mx + log(sum);
                for (int d = 0; d < HD; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) o += P[(size_t)i * T + j] * V(j, d);
                    out[(((size_t)b * T + i) * NH + h) * HD + d] = o;
                }
                if (!dout) continue;
                double Di = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < HD; d++) s += (double)DO(i, d) * V(j, d);
                    dP[j] = s;
                    Di += P[(size_t)i * T + j] * s;
                }
                for (int j = 0; j <= i; j++) {
                    double p = P[(size_t)i * T + j], ds = p * (dP[j] - Di);
                    for (int d = 0; d < HD; d++) {
                        DV(j, d) += p * DO(i, d);
                        DQ(i, d) += scale * ds * K(j, d);
                        DK(j, d) += scale * ds * Q(i, d);
                    }
                }
            }
#undef Q
#undef K
#undef V
#undef DO
#undef DQ
#undef DK
#undef DV
        }
    free(P);
    free(dP);
}

static void test_attention(int B, int T, int NH, int NKV, int HD) {
    int QKV = NH + 2 * NKV;
    size_t nqkv = (size_t)B * T * QKV * HD, no = (size_t)B * T * NH * HD, nl = (size_t)B * NH * T;
    float *qkv = rnd(nqkv, -1.5f, 1.5f), *dout = rnd(no, -1, 1);
    double *ro = dzeros(no), *rl = dzeros(nl), *rd = dzeros(nqkv);
    ref_attention(ro, rl, rd, qkv, dout, B, T, NH, NKV, HD);
    float *out = malloc(sizeof(float) * no), *lse = malloc(sizeof(float) * nl), *dqkv = rnd(nqkv, -9, 9);
    char what[128];
    OK(be->ops->attention_fwd(be, out, lse, qkv, B, T, NH, NKV, HD));
    snprintf(what, sizeof what, "attention_fwd out B=%d T=%d NH=%d NKV=%d HD=%d", B, T, NH, NKV, HD);
    expect_close(what, out, ro, no, LIM_ATT);
    snprintf(what, sizeof what, "attention_fwd lse B=%d T=%d NH=%d NKV=%d HD=%d", B, T, NH, NKV, HD);
    expect_close(what, lse, rl, nl, LIM_ATT);
    OK(be->ops->attention_bwd(be, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HD));
    snprintf(what, sizeof what, "attention_bwd dqkv B=%d T=%d NH=%d NKV=%d HD=%d", B, T, NH, NKV, HD);
    expect_close(what, dqkv, rd, nqkv, LIM_ATT);
    // Each of dq, dk, dv on its own, so that a small part cannot hide in the total.
    for (int part = 0; part < 3; part++) {
        int h0 = part == 0 ? 0 : part == 1 ? NH : NH + NKV, nh = part == 0 ? NH : NKV;
        size_t m = (size_t)B * T * nh * HD, k = 0;
        float *a = malloc(sizeof(float) * m);
        double *r = dzeros(m);
        for (size_t bt = 0; bt < (size_t)B * T; bt++)
            for (int i = 0; i < nh * HD; i++, k++) {
                a[k] = dqkv[bt * QKV * HD + (size_t)h0 * HD + i];
                r[k] = rd[bt * QKV * HD + (size_t)h0 * HD + i];
            }
        snprintf(what, sizeof what, "attention_bwd %s B=%d T=%d NH=%d NKV=%d HD=%d", part == 0 ? "dq" : part == 1 ? "dk" : "dv",
                 B, T, NH, NKV, HD);
        expect_close(what, a, r, m, LIM_ATT);
        free(a);
        free(r);
    }
    free(qkv); free(dout); free(ro); free(rl); free(rd); free(out); free(lse); free(dqkv);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// T = 16384 with tiny heads: must run in seconds with O(tile) scratch. Checks
// sampled rows of out, lse and dq (each depends on its own query row only)
// against the double reference, and that dk, dv are finite.
static void test_attention_long(void) {
    int B = 1, T = 16384, NH = 4, NKV = 2, HD = 16, QKV = NH + 2 * NKV, G = NH / NKV;
    size_t nqkv = (size_t)B * T * QKV * HD, no = (size_t)B * T * NH * HD;
    float *qkv = rnd(nqkv, -1.5f, 1.5f), *dout = rnd(no, -1, 1);
    float *out = malloc(sizeof(float) * no), *lse = malloc(sizeof(float) * NH * T), *dqkv = malloc(sizeof(float) * nqkv);
    double t0 = now_s();
    OK(be->ops->attention_fwd(be, out, lse, qkv, B, T, NH, NKV, HD));
    double t1 = now_s();
    OK(be->ops->attention_bwd(be, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HD));
    double t2 = now_s();
    fprintf(stderr, "attention T=%d NH=%d NKV=%d HD=%d: fwd %.2f s, bwd %.2f s (%d threads)\n", T, NH, NKV, HD, t1 - t0,
            t2 - t1, omp_get_max_threads());
    const int rows[] = {0, 1, 63, 64, 1000, 8191, 12345, T - 1};
    double scale = 1.0 / sqrt((double)HD), *p = malloc(sizeof(double) * T);
    float got[3 * 4 * 16];
    double ref[3 * 4 * 16];
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
        int i = rows[ri], k = 0;
        for (int h = 0; h < NH; h++) {
            int kvh = h / G;
            const float *q = qkv + ((size_t)i * QKV + h) * HD, *g = dout + ((size_t)i * NH + h) * HD;
            double mx = -INFINITY, sum = 0, Di = 0;
            for (int j = 0; j <= i; j++) {
                const float *kk = qkv + ((size_t)j * QKV + NH + kvh) * HD;
                double s = 0;
                for (int d = 0; d < HD; d++) s += (double)q[d] * kk[d];
                p[j] = s * scale;
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
            double o[16] = {0}, dq[16] = {0};
            for (int j = 0; j <= i; j++) {
                p[j] /= sum;
                const float *v = qkv + ((size_t)j * QKV + NH + NKV + kvh) * HD;
                for (int d = 0; d < HD; d++) o[d] += p[j] * v[d];
            }
            for (int d = 0; d < HD; d++) Di += o[d] * g[d];
            for (int j = 0; j <= i; j++) {
                const float *v = qkv + ((size_t)j * QKV + NH + NKV + kvh) * HD;
                const float *kk = qkv + ((size_t)j * QKV + NH + kvh) * HD;
                double dp = 0;
                for (int d = 0; d < HD; d++) dp += (double)g[d] * v[d];
                for (int d = 0; d < HD; d++) dq[d] += scale * p[j] * (dp - Di) * kk[d];
            }
            for (int d = 0; d < HD; d++, k++) {
                got[k] = out[((size_t)i * NH + h) * HD + d];
                ref[k] = o[d];
                got[NH * HD + k] = dqkv[((size_t)i * QKV + h) * HD + d];
                ref[NH * HD + k] = dq[d];
            }
            got[2 * NH * HD + h] = lse[(size_t)h * T + i];
            ref[2 * NH * HD + h] = mx + log(sum);
        }
        char what[64];
        snprintf(what, sizeof what, "attention T=16384 row %d out", i);
        expect_close(what, got, ref, (size_t)NH * HD, LIM_ATT);
        snprintf(what, sizeof what, "attention T=16384 row %d dq", i);
        expect_close(what, got + NH * HD, ref + NH * HD, (size_t)NH * HD, 1e-8);
        snprintf(what, sizeof what, "attention T=16384 row %d lse", i);
        expect_close(what, got + 2 * NH * HD, ref + 2 * NH * HD, NH, LIM_ATT);
    }
    int finite = 1;
    for (size_t i = 0; i < nqkv; i++) finite &= isfinite(dqkv[i]) != 0;
    CHECK(finite, "attention T=16384: dqkv has non-finite values");
    free(p); free(qkv); free(dout); free(out); free(lse); free(dqkv);
}

// ---------------------------------------------------------------- elementwise

static void test_swiglu(int N, int F) {
    float *gu = rnd((size_t)N * 2 * F, -4, 4), *dh = rnd((size_t)N * F, -1, 1);
    double *rh = dzeros((size_t)N * F), *rd = dzeros((size_t)N * 2 * F);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            double g = gu[(size_t)n * 2 * F + i], u = gu[(size_t)n * 2 * F + F + i], d = dh[(size_t)n * F + i];
            double sig = 1.0 / (1.0 + exp(-g));
            rh[(size_t)n * F + i] = g * sig * u;
            rd[(size_t)n * 2 * F + i] = d * u * (sig + g * sig * (1 - sig));
            rd[(size_t)n * 2 * F + F + i] = d * g * sig;
        }
    float *h = malloc(sizeof(float) * N * F), *dgu = malloc(sizeof(float) * N * 2 * F);
    OK(be->ops->swiglu_fwd(be, h, gu, N, F));
    expect_close("swiglu_fwd", h, rh, (size_t)N * F, LIM_F32);
    OK(be->ops->swiglu_bwd(be, dgu, dh, gu, N, F));
    expect_close("swiglu_bwd", dgu, rd, (size_t)N * 2 * F, LIM_F32);
    free(gu); free(dh); free(rh); free(rd); free(h); free(dgu);
}

static void test_add(size_t n) {
    float *a = rnd(n, -1, 1), *b = rnd(n, -1, 1), *o = malloc(sizeof(float) * n);
    double *r = dzeros(n);
    for (size_t i = 0; i < n; i++) r[i] = (double)a[i] + b[i];
    OK(be->ops->add(be, o, a, b, n));
    expect_close("add", o, r, n, LIM_EXACTISH);
    OK(be->ops->add(be, a, a, b, n)); // out aliases a
    expect_same("add in place", a, o, sizeof(float) * n);
    free(a); free(b); free(o); free(r);
}

static void test_xent(int n, int V, float offset) {
    float *logits = rnd((size_t)n * V, -4 + offset, 4 + offset), dscale = 1.0f / n;
    int32_t *tg = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) tg[i] = (int32_t)((i * 7919u + 13) % (unsigned)V);
    double *rl = dzeros(n), *rg = dzeros((size_t)n * V);
    for (int i = 0; i < n; i++) {
        const float *x = logits + (size_t)i * V;
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < V; j++) s += exp(x[j] - mx);
        rl[i] = mx + log(s) - x[tg[i]];
        for (int j = 0; j < V; j++) rg[(size_t)i * V + j] = dscale * (exp(x[j] - mx) / s - (j == tg[i]));
    }
    float *losses = malloc(sizeof(float) * n);
    OK(be->ops->xent_fwd_bwd(be, logits, losses, tg, n, V, dscale));
    char what[64];
    snprintf(what, sizeof what, "xent losses (logit offset %g)", offset);
    expect_close(what, losses, rl, n, LIM_F32);
    snprintf(what, sizeof what, "xent dlogits (logit offset %g)", offset);
    expect_close(what, logits, rg, (size_t)n * V, LIM_F32);
    tg[0] = V;
    CHECK(be->ops->xent_fwd_bwd(be, logits, losses, tg, n, V, dscale) == MT_ERR_ARG, "xent accepted target == V");
    free(logits); free(tg); free(rl); free(rg); free(losses);
}

static void test_embedding(int N, int V, int C) {
    int32_t *ids = malloc(sizeof(int32_t) * N);
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 37u + (n % 3) * 5u) % (unsigned)V); // with repeats
    ids[N - 1] = ids[0];
    float *wte = rnd((size_t)V * C, -1, 1), *dout = rnd((size_t)N * C, -1, 1), *out = malloc(sizeof(float) * N * C);
    double *ro = dzeros((size_t)N * C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) ro[(size_t)n * C + c] = wte[(size_t)ids[n] * C + c];
    OK(be->ops->embedding_fwd(be, out, ids, wte, MT_F32, N, C));
    expect_close("embedding_fwd", out, ro, (size_t)N * C, 0.0);
    uint16_t *wb = to_bf16(wte, (size_t)V * C);
    float *wr = round_bf16(wte, (size_t)V * C);
    OK(be->ops->embedding_fwd(be, out, ids, wb, MT_BF16, N, C));
    float *out2 = malloc(sizeof(float) * N * C);
    for (int n = 0; n < N; n++) memcpy(out2 + (size_t)n * C, wr + (size_t)ids[n] * C, sizeof(float) * C);
    expect_same("embedding_fwd bf16", out, out2, sizeof(float) * N * C);

    // backward accumulates onto a prefilled dwte
    float *pre = rnd((size_t)V * C, -1, 1), *dw = dup(pre, (size_t)V * C);
    double *rdw = dzeros((size_t)V * C);
    for (size_t i = 0; i < (size_t)V * C; i++) rdw[i] = pre[i];
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) rdw[(size_t)ids[n] * C + c] += dout[(size_t)n * C + c];
    OK(be->ops->embedding_bwd(be, dw, MT_F32, ids, dout, N, C));
    expect_close("embedding_bwd", dw, rdw, (size_t)V * C, LIM_F32);
    // bf16: each row summed in f32 in token order from its current value, rounded once
    uint16_t *dwb = to_bf16(pre, (size_t)V * C), *eb = malloc(sizeof(uint16_t) * V * C);
    for (int v = 0; v < V; v++)
        for (int c = 0; c < C; c++) {
            float acc = mt_bf16_to_f32(dwb[(size_t)v * C + c]);
            for (int n = 0; n < N; n++)
                if (ids[n] == v) acc += dout[(size_t)n * C + c];
            eb[(size_t)v * C + c] = mt_f32_to_bf16(acc);
        }
    OK(be->ops->embedding_bwd(be, dwb, MT_BF16, ids, dout, N, C));
    expect_same("embedding_bwd bf16", dwb, eb, sizeof(uint16_t) * V * C);
    free(ids); free(wte); free(dout); free(out); free(ro); free(wb); free(wr); free(out2); free(pre); free(dw);
    free(rdw); free(dwb); free(eb);
}

static void test_cast(size_t n) {
    float *x = rnd(n, -100, 100), *y = malloc(sizeof(float) * n);
    uint16_t *b = malloc(sizeof(uint16_t) * n), *e = to_bf16(x, n);
    OK(be->ops->cast(be, b, MT_BF16, x, MT_F32, n));
    expect_same("cast f32->bf16", b, e, sizeof(uint16_t) * n);
    OK(be->ops->cast(be, y, MT_F32, b, MT_BF16, n));
    float *r = round_bf16(x, n);
    expect_same("cast bf16->f32", y, r, sizeof(float) * n);
    OK(be->ops->cast(be, y, MT_F32, x, MT_F32, n));
    expect_same("cast f32->f32", y, x, sizeof(float) * n);
    free(x); free(y); free(b); free(e); free(r);
}

// ---------------------------------------------------------------- determinism

// Backward kernels with 1 thread and with 3 threads must agree bitwise.
static void test_thread_independence(void) {
    int B = 1, T = 300, NH = 4, NKV = 2, HD = 16, QKV = NH + 2 * NKV, R = 700, D = 96, V = 40;
    size_t nqkv = (size_t)B * T * QKV * HD, no = (size_t)B * T * NH * HD;
    float *qkv = rnd(nqkv, -1.5f, 1.5f), *dout = rnd(no, -1, 1), *out = malloc(sizeof(float) * no);
    float *lse = malloc(sizeof(float) * NH * T), *d1 = malloc(sizeof(float) * nqkv), *d3 = malloc(sizeof(float) * nqkv);
    float *x = rnd((size_t)R * D, -1, 1), *w = rnd(D, 0.5f, 1.5f), *g = rnd((size_t)R * D, -1, 1);
    float *rstd = malloc(sizeof(float) * R), *y = malloc(sizeof(float) * R * D);
    float *dx1 = malloc(sizeof(float) * R * D), *dx3 = malloc(sizeof(float) * R * D);
    float *dw1 = malloc(sizeof(float) * D), *dw3 = malloc(sizeof(float) * D), *db1 = calloc(D, 4), *db3 = calloc(D, 4);
    float *m1 = calloc((size_t)D * D, 4), *m3 = calloc((size_t)D * D, 4);
    float *e1 = calloc((size_t)V * D, 4), *e3 = calloc((size_t)V * D, 4);
    int32_t *ids = malloc(sizeof(int32_t) * R);
    for (int i = 0; i < R; i++) ids[i] = (i * 13) % V;
    OK(be->ops->rmsnorm_fwd(be, y, rstd, x, w, MT_F32, R, D, 1e-5f));
    int saved = omp_get_max_threads();
    for (int pass = 0; pass < 2; pass++) {
        omp_set_num_threads(pass == 0 ? 1 : 3);
        OK(be->ops->attention_fwd(be, out, lse, qkv, B, T, NH, NKV, HD));
        OK(be->ops->attention_bwd(be, pass ? d3 : d1, dout, qkv, out, lse, B, T, NH, NKV, HD));
        OK(be->ops->rmsnorm_bwd(be, pass ? dx3 : dx1, pass ? dw3 : dw1, g, x, w, rstd, MT_F32, R, D));
        OK(be->ops->matmul_bwd(be, NULL, pass ? m3 : m1, pass ? db3 : db1, g, x, w, MT_F32, R, D, D, 0));
        OK(be->ops->embedding_bwd(be, pass ? e3 : e1, MT_F32, ids, g, R, D));
    }
    omp_set_num_threads(saved);
    expect_same("attention_bwd 1 vs 3 threads", d1, d3, sizeof(float) * nqkv);
    expect_same("rmsnorm_bwd dinp 1 vs 3 threads", dx1, dx3, sizeof(float) * R * D);
    expect_same("rmsnorm_bwd dw 1 vs 3 threads", dw1, dw3, sizeof(float) * D);
    expect_same("matmul_bwd dbias 1 vs 3 threads", db1, db3, sizeof(float) * D);
    expect_same("embedding_bwd 1 vs 3 threads", e1, e3, sizeof(float) * V * D);
    free(qkv); free(dout); free(out); free(lse); free(d1); free(d3); free(x); free(w); free(g); free(rstd); free(y);
    free(dx1); free(dx3); free(dw1); free(dw3); free(db1); free(db3); free(m1); free(m3); free(e1); free(e3);
    free(ids);
}

// ---------------------------------------------------------------- backend plumbing

static void test_plumbing(void) {
    mt_backend *b2 = NULL;
    CHECK(mt_backend_cpu_create(MT_BF16, &b2) == MT_ERR_UNSUPPORTED && !b2, "cpu accepted bf16 activations");
    CHECK(mt_backend_create("sim", MT_F32, &b2) != MT_OK && strstr(mt_last_error(), "--hardware"),
          "sim backend without a profile: expected an error naming --hardware, got: %s", mt_last_error());
    CHECK(mt_backend_create("nope", MT_F32, &b2) == MT_ERR_ARG, "unknown backend: expected ARG");
    CHECK(strstr(mt_last_error(), "nope") != NULL, "unknown backend message does not name it: %s", mt_last_error());
    const char *names[8];
    int n = mt_backend_list(names, 8), has_cpu = 0;
    for (int i = 0; i < n && i < 8; i++) has_cpu |= strcmp(names[i], "cpu") == 0;
    CHECK(n >= 1 && has_cpu, "mt_backend_list lacks cpu");
#ifndef MT_HAVE_CUDA
    OK(mt_backend_create("auto", MT_F32, &b2));
    CHECK(b2 && strcmp(b2->ops->name, "cpu") == 0, "auto without CUDA is not cpu");
    mt_backend_destroy(b2);
#endif

    mt_device_info info;
    OK(be->ops->device_info(be, &info));
    CHECK(strncmp(info.name, "cpu", 3) == 0 && info.mem_total_bytes > 0 && info.mem_free_bytes > 0 &&
              info.mem_free_bytes <= info.mem_total_bytes,
          "device_info: %s total %zu free %zu", info.name, info.mem_total_bytes, info.mem_free_bytes);

    void *h = NULL, *d = NULL;
    OK(be->ops->host_alloc(be, 10000, &h));
    CHECK(h && ((uintptr_t)h % 4096) == 0, "host_alloc not page-aligned");
    OK(be->ops->dev_alloc(be, 10000, &d));
    CHECK(d && ((uintptr_t)d % 64) == 0, "dev_alloc not 64-byte aligned");
    memset(h, 7, 10000);
    OK(be->ops->copy(be, d, h, 10000, MT_COPY_H2D, MT_STREAM_H2D));
    CHECK(memcmp(d, h, 10000) == 0, "copy H2D");
    OK(be->ops->memset_zero(be, d, 5000, MT_STREAM_COMPUTE));
    CHECK(((unsigned char *)d)[4999] == 0 && ((unsigned char *)d)[5000] == 7, "memset_zero range");
    be->ops->host_free(be, h, 10000);
    be->ops->dev_free(be, d);
#ifndef __SANITIZE_ADDRESS__ // ASan aborts on impossible sizes instead of returning NULL
    void *huge = NULL;
    mt_status s = be->ops->dev_alloc(be, (size_t)1 << 62, &huge);
    CHECK(s == MT_ERR_MEMORY && !huge && strstr(mt_last_error(), "4611686018427387904"),
          "dev_alloc of 2^62 bytes: %s (%s)", mt_status_name(s), mt_last_error());
#endif

    mt_event *e0 = NULL, *e1 = NULL;
    OK(be->ops->event_create(be, &e0));
    OK(be->ops->event_create(be, &e1));
    float ms = -1;
    CHECK(be->ops->event_elapsed_ms(be, e0, e1, &ms) != MT_OK, "elapsed on unrecorded events succeeded");
    OK(be->ops->event_record(be, e0, MT_STREAM_COMPUTE));
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    OK(be->ops->event_record(be, e1, MT_STREAM_D2H));
    OK(be->ops->stream_wait(be, MT_STREAM_COMPUTE, e1));
    OK(be->ops->event_sync(be, e1));
    OK(be->ops->stream_sync(be, MT_STREAM_H2D));
    OK(be->ops->event_elapsed_ms(be, e0, e1, &ms));
    CHECK(ms >= 19.0f && ms < 2000.0f, "event_elapsed_ms %.3f for a 20 ms sleep", ms);
    be->ops->event_destroy(be, e0);
    be->ops->event_destroy(be, e1);

    CHECK(be->ops->attention_fwd(be, NULL, NULL, NULL, 1, 4, 3, 2, 16) == MT_ERR_SHAPE, "NH %% NKV != 0 accepted");
    CHECK(be->ops->rope_fwd(be, NULL, NULL, NULL, NULL, 1, 4, 2, 2, 15) == MT_ERR_SHAPE, "odd HD accepted by rope");
}

int main(void) {
    OK(mt_backend_cpu_create(MT_F32, &be));
    if (!be) return mt_test_finish("test_cpu_ops");
    test_plumbing();
    test_matmul(37, 48, 40);
    test_matmul(1, 7, 3);
    test_matmul(130, 64, 200);
    test_rmsnorm(37, 96);
    test_rmsnorm(2000, 64); // more rows than reduction blocks
    test_fused_residual_norm(37, 96);
    test_fused_residual_norm(2000, 70);
    test_qk_norm(37, 4, 2, 16);
    test_qk_norm(74, 4, 2, 32);
    test_rope(2, 37, 4, 2, 16);
    test_rope(1, 70, 2, 1, 32);
    test_attention(2, 37, 4, 2, 16);  // GQA, odd T, B=2
    test_attention(1, 150, 4, 2, 32); // T > tile, not a tile multiple
    test_attention(1, 130, 2, 1, 16); // all heads share one kv head
    test_attention(2, 64, 2, 2, 8);   // MHA, exactly one tile
    test_attention(1, 1, 4, 2, 16);   // single token
    test_attention(1, 200, 8, 2, 64); // wide heads, G = 4
    test_swiglu(37, 50);
    test_add(100001);
    test_xent(37, 1000, 0.0f);
    test_xent(5, 30000, 80.0f); // large logits: exp would overflow without the max shift
    test_embedding(37, 50, 300);
    test_cast(100003);
    test_thread_independence();
    // 16k-token causal attention is ~60 GFLOP: seconds natively, most of an hour under
    // qemu-user (make test-aarch64 sets MT_EMULATED); the kernels are checked above.
    if (getenv("MT_EMULATED")) fprintf(stderr, "test_cpu_ops: attention T=16384 skipped under emulation (MT_EMULATED)\n");
    else test_attention_long();
    mt_backend_destroy(be);
    return mt_test_finish("test_cpu_ops");
}
