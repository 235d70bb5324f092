// op_cases.c: the op table every backend is tested with (test_backend_ops.c runs it).
// Each family below holds its double-precision reference (attention with the full score
// matrix) and its outputs' limits; the table at the end lists the shapes, each with what
// it exercises. Inputs are rounded to the backend's dtypes first, so the reference sees
// exactly the values the backend reads and only compute and rounding differ.
#include "op_cases.h"
#include "backend/backend_registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *dz(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

// ---------------------------------------------------------------- matmul

// out(N,OC) = inp @ w^T (+ bias); dinp = dout @ w; dw = dout^T @ inp; dbias = sum_n dout.
static void ref_matmul(double *out, double *dinp, double *dw, double *db, const float *inp, const float *w,
                       const float *bias, const float *dout, int N, int IC, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0, g = dout ? dout[(size_t)n * OC + o] : 0;
            for (int i = 0; i < IC; i++) {
                s += (double)inp[(size_t)n * IC + i] * w[(size_t)o * IC + i];
                if (dinp) dinp[(size_t)n * IC + i] += g * w[(size_t)o * IC + i];
                if (dw) dw[(size_t)o * IC + i] += g * inp[(size_t)n * IC + i];
            }
            if (out) out[(size_t)n * OC + o] = s;
            if (db) db[o] += g;
        }
}

// prefilled + gradient, as the ACC flags ask
static double *plus(const float *pre, const double *g, size_t n) {
    double *r = dz(n);
    for (size_t i = 0; i < n; i++) r[i] = (double)pre[i] + g[i];
    return r;
}

static void fam_matmul(oc_ctx *c, const oc_row *row) {
    int N = row->s.N, IC = row->s.C, OC = row->s.OC;
    mt_dtype act = c->act, wdt = c->wdt;
    size_t ni = (size_t)N * IC, nw = (size_t)OC * IC, no = (size_t)N * OC;
    oc_t inp = oc_rand(c, ni, act), w = oc_rand(c, nw, wdt), b = oc_rand(c, OC, wdt), dout = oc_rand(c, no, act);
    oc_t out = oc_rand(c, no, act), out_nb = oc_rand(c, no, act);
    double *ro = dz(no), *ro_nb = dz(no), *rdi = dz(ni), *rdw = dz(nw), *rdb = dz(OC);
    ref_matmul(ro, NULL, NULL, NULL, inp.h, w.h, b.h, NULL, N, IC, OC);
    ref_matmul(ro_nb, rdi, rdw, rdb, inp.h, w.h, NULL, dout.h, N, IC, OC);
    double ta = oc_tol(c, OC_BY_ACT, 1e-10, 1e-4), tw = oc_tol(c, OC_BY_ANY, 1e-10, 2e-4);
    double flops = 2.0 * N * IC * OC;
    OC_RUN(c, "matmul_fwd", flops, mt_backend_matmul_fwd(c->be, out.d, inp.d, w.d, b.d, wdt, N, IC, OC));
    oc_close(c, "matmul_fwd bias", &out, ro, ta);
    OC_RUN(c, "matmul_fwd no bias", flops, mt_backend_matmul_fwd(c->be, out_nb.d, inp.d, w.d, NULL, wdt, N, IC, OC));
    oc_close(c, "matmul_fwd no bias", &out_nb, ro_nb, ta);

    // flags 0 overwrites; ACC_DINP|ACC_DW adds onto prefilled buffers (dbias follows dw)
    oc_t dinp = oc_rand(c, ni, act), dw = oc_rand(c, nw, wdt), db = oc_rand(c, OC, wdt);
    OC_RUN(c, "matmul_bwd", 2 * flops,
           mt_backend_matmul_bwd(c->be, dinp.d, dw.d, db.d, dout.d, inp.d, w.d, wdt, N, IC, OC, 0));
    oc_close(c, "matmul_bwd dinp", &dinp, rdi, ta);
    oc_close(c, "matmul_bwd dw", &dw, rdw, tw);
    oc_close(c, "matmul_bwd dbias", &db, rdb, tw);
    oc_t ai = oc_rand(c, ni, act), aw = oc_rand(c, nw, wdt), ab = oc_rand(c, OC, wdt);
    double *ei = plus(ai.h, rdi, ni), *ew = plus(aw.h, rdw, nw), *eb = plus(ab.h, rdb, OC);
    float *pw = malloc(nw * sizeof(float)), *pi = malloc(ni * sizeof(float));
    memcpy(pw, aw.h, nw * sizeof(float));
    memcpy(pi, ai.h, ni * sizeof(float));
    if (!c->perf) {
        oc_ok(c, mt_backend_matmul_bwd(c->be, ai.d, aw.d, ab.d, dout.d, inp.d, w.d, wdt, N, IC, OC, MT_ACC_DINP | MT_ACC_DW),
              "matmul_bwd acc");
        oc_close(c, "matmul_bwd acc dinp", &ai, ei, ta);
        oc_close(c, "matmul_bwd acc dw", &aw, ew, tw);
        oc_close(c, "matmul_bwd acc dbias", &ab, eb, tw);
        // ACC_DW alone: dinp overwritten, dw accumulated, dbias NULL skipped
        memcpy(aw.h, pw, nw * sizeof(float));
        memcpy(ai.h, pi, ni * sizeof(float));
        oc_upload(c, &aw), oc_upload(c, &ai);
        oc_ok(c, mt_backend_matmul_bwd(c->be, ai.d, aw.d, NULL, dout.d, inp.d, w.d, wdt, N, IC, OC, MT_ACC_DW),
              "matmul_bwd acc dw only");
        oc_close(c, "matmul_bwd acc dw only: dinp", &ai, rdi, ta);
        oc_close(c, "matmul_bwd acc dw only: dw", &aw, ew, tw);
        // dinp NULL (the first layer's input needs none) and dbias NULL
        oc_upload(c, &aw);
        oc_ok(c, mt_backend_matmul_bwd(c->be, NULL, aw.d, NULL, dout.d, inp.d, w.d, wdt, N, IC, OC, 0),
              "matmul_bwd dw only");
        oc_close(c, "matmul_bwd dinp NULL: dw", &aw, rdw, tw);
    }
    // bf16 weights give the bits of the same weights as f32 (rounded to bf16), and bf16
    // gradients the bits of the f32 gradients rounded once
    if (wdt == MT_BF16 && !c->perf && oc_supports(c, MT_OP_MATMUL_FWD, MT_SHAPE_BITWISE) &&
        oc_supports(c, MT_OP_MATMUL_BWD, MT_SHAPE_BITWISE)) {
        oc_t w32 = oc_from(c, w.h, nw, MT_F32), b32 = oc_from(c, b.h, OC, MT_F32), o32 = oc_rand(c, no, act);
        oc_ok(c, mt_backend_matmul_fwd(c->be, o32.d, inp.d, w32.d, b32.d, MT_F32, N, IC, OC), "matmul_fwd f32 w");
        oc_same(c, "matmul_fwd bf16 weights = f32 weights", &out, &o32);
        oc_t di16 = oc_from(c, pi, ni, act), di32 = oc_from(c, pi, ni, act);
        oc_t dw16 = oc_from(c, pw, nw, MT_BF16), dw32 = oc_from(c, dw16.h, nw, MT_F32);
        oc_t db16 = oc_from(c, ab.h, OC, MT_BF16), db32 = oc_from(c, db16.h, OC, MT_F32);
        int fl = MT_ACC_DW | MT_ACC_DINP;
        oc_ok(c, mt_backend_matmul_bwd(c->be, di16.d, dw16.d, db16.d, dout.d, inp.d, w.d, MT_BF16, N, IC, OC, fl), "bwd bf16");
        oc_ok(c, mt_backend_matmul_bwd(c->be, di32.d, dw32.d, db32.d, dout.d, inp.d, w32.d, MT_F32, N, IC, OC, fl), "bwd f32");
        oc_same(c, "matmul_bwd bf16 dinp = f32", &di16, &di32);
        float *g = oc_download(c, &dw32), *gb = oc_download(c, &db32);
        oc_t dw32b = oc_from(c, g, nw, MT_BF16), db32b = oc_from(c, gb, OC, MT_BF16);
        oc_same(c, "matmul_bwd bf16 acc dw = f32 rounded once", &dw16, &dw32b);
        oc_same(c, "matmul_bwd bf16 acc dbias = f32 rounded once", &db16, &db32b);
        free(g), free(gb);
        oc_free(c, &w32), oc_free(c, &b32), oc_free(c, &o32), oc_free(c, &di16), oc_free(c, &di32);
        oc_free(c, &dw16), oc_free(c, &dw32), oc_free(c, &db16), oc_free(c, &db32), oc_free(c, &dw32b), oc_free(c, &db32b);
    }
    oc_free(c, &inp), oc_free(c, &w), oc_free(c, &b), oc_free(c, &dout), oc_free(c, &out), oc_free(c, &out_nb);
    oc_free(c, &dinp), oc_free(c, &dw), oc_free(c, &db), oc_free(c, &ai), oc_free(c, &aw), oc_free(c, &ab);
    free(ro), free(ro_nb), free(rdi), free(rdw), free(rdb), free(ei), free(ew), free(eb), free(pw), free(pi);
}

// The MLP / loss-head pattern (engine/layer.c, head.c): chunks of R rows through
// row-offset pointers, dW accumulated (ACC_DW) after the first chunk, dbias NULL; against
// the whole product. p[1] shifts every activation by that many elements (1: 2- or
// 4-byte aligned pointers).
static void fam_matmul_chunked(oc_ctx *c, const oc_row *row) {
    int N = row->s.N, IC = row->s.C, OC = row->s.OC, R = row->p[0];
    size_t o = (size_t)row->p[1];
    mt_dtype act = c->act, wdt = c->wdt;
    oc_t inp = oc_rand(c, o + (size_t)N * IC, act), w = oc_rand(c, (size_t)OC * IC, wdt);
    oc_t out = oc_rand(c, o + (size_t)N * OC, act), dout = oc_rand(c, o + (size_t)N * OC, act);
    oc_t dinp = oc_rand(c, o + (size_t)N * IC, act), dw = oc_rand(c, (size_t)OC * IC, wdt);
    double *ro = dz(o + (size_t)N * OC), *rdi = dz(o + (size_t)N * IC), *rdw = dz((size_t)OC * IC);
    for (size_t i = 0; i < o; i++) ro[i] = out.h[i], rdi[i] = dinp.h[i]; // the shifted-off heads stay
    ref_matmul(ro + o, rdi + o, rdw, NULL, inp.h + o, w.h, NULL, dout.h + o, N, IC, OC);
    for (int r0 = 0; r0 < N; r0 += R) {
        int n = N - r0 < R ? N - r0 : R;
        oc_ok(c, mt_backend_matmul_fwd(c->be, oc_at(&out, o + (size_t)r0 * OC), oc_at(&inp, o + (size_t)r0 * IC), w.d,
                                       NULL, wdt, n, IC, OC), "matmul_fwd chunk");
        oc_ok(c, mt_backend_matmul_bwd(c->be, oc_at(&dinp, o + (size_t)r0 * IC), dw.d, NULL,
                                       oc_at(&dout, o + (size_t)r0 * OC), oc_at(&inp, o + (size_t)r0 * IC), w.d, wdt, n,
                                       IC, OC, r0 > 0 ? MT_ACC_DW : 0), "matmul_bwd chunk");
    }
    oc_close(c, "matmul_fwd chunked", &out, ro, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "matmul_bwd chunked dinp", &dinp, rdi, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "matmul_bwd chunked dw (ACC_DW)", &dw, rdw, oc_tol(c, OC_BY_ANY, 1e-10, 2e-4));
    oc_free(c, &inp), oc_free(c, &w), oc_free(c, &out), oc_free(c, &dout), oc_free(c, &dinp), oc_free(c, &dw);
    free(ro), free(rdi), free(rdw);
}

// ---------------------------------------------------------------- rmsnorm

static double ref_rms_row(double *y, const float *x, const float *w, int D, double eps) {
    double ss = 0;
    for (int i = 0; i < D; i++) ss += (double)x[i] * x[i];
    double r = 1.0 / sqrt(ss / D + eps);
    for (int i = 0; i < D; i++) y[i] = x[i] * r * w[i];
    return r;
}

// dx (overwritten) and dw (accumulated) of one row, from the analytic formula.
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

static void fam_rmsnorm(oc_ctx *c, const oc_row *row) {
    int R = row->s.N, D = row->s.C;
    float eps = 1e-5f;
    size_t n = (size_t)R * D;
    mt_dtype act = c->act, wdt = c->wdt;
    oc_t x = oc_new(c, n, act, -2, 2), w = oc_new(c, D, wdt, 0.5f, 1.5f), g = oc_rand(c, n, act);
    oc_t y = oc_rand(c, n, act), rstd = oc_rand(c, R, MT_F32), dx = oc_rand(c, n, act), dw = oc_rand(c, D, wdt);
    double *ry = dz(n), *rr = dz(R), *rdx = dz(n), *rdw = dz(D);
    for (int r = 0; r < R; r++) {
        rr[r] = ref_rms_row(ry + (size_t)r * D, x.h + (size_t)r * D, w.h, D, eps);
        ref_rms_row_bwd(rdx + (size_t)r * D, rdw, g.h + (size_t)r * D, x.h + (size_t)r * D, w.h, D, eps);
    }
    OC_RUN(c, "rmsnorm_fwd", 0, mt_backend_rmsnorm_fwd(c->be, y.d, rstd.d, x.d, w.d, wdt, R, D, eps));
    oc_close(c, "rmsnorm_fwd out", &y, ry, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "rmsnorm_fwd rstd", &rstd, rr, 1e-10);
    OC_RUN(c, "rmsnorm_bwd", 0, mt_backend_rmsnorm_bwd(c->be, dx.d, dw.d, g.d, x.d, w.d, rstd.d, wdt, R, D));
    oc_close(c, "rmsnorm_bwd dinp", &dx, rdx, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "rmsnorm_bwd dw", &dw, rdw, oc_tol(c, OC_BY_W, 1e-9, 1e-4));
    if (!c->perf && oc_supports(c, MT_OP_RMSNORM_FWD, MT_SHAPE_IN_PLACE) &&
        oc_supports(c, MT_OP_RMSNORM_BWD, MT_SHAPE_IN_PLACE)) { // out == inp, dinp == dout
        oc_t xi = oc_from(c, x.h, n, act), gi = oc_from(c, g.h, n, act), dw2 = oc_rand(c, D, wdt);
        oc_t rs2 = oc_rand(c, R, MT_F32);
        oc_ok(c, mt_backend_rmsnorm_fwd(c->be, xi.d, rs2.d, xi.d, w.d, wdt, R, D, eps), "rmsnorm_fwd in place");
        oc_same(c, "rmsnorm_fwd in place", &xi, &y);
        oc_ok(c, mt_backend_rmsnorm_bwd(c->be, gi.d, dw2.d, gi.d, x.d, w.d, rstd.d, wdt, R, D), "rmsnorm_bwd in place");
        oc_same(c, "rmsnorm_bwd in place", &gi, &dx);
        oc_free(c, &xi), oc_free(c, &gi), oc_free(c, &dw2), oc_free(c, &rs2);
    }
    if (wdt == MT_BF16 && !c->perf && oc_supports(c, MT_OP_RMSNORM_FWD, MT_SHAPE_BITWISE) &&
        oc_supports(c, MT_OP_RMSNORM_BWD, MT_SHAPE_BITWISE)) { // bf16 weights = the same weights as f32
        oc_t w32 = oc_from(c, w.h, D, MT_F32), y32 = oc_rand(c, n, act), rs = oc_rand(c, R, MT_F32);
        oc_t dx32 = oc_rand(c, n, act), dw32 = oc_rand(c, D, MT_F32);
        oc_ok(c, mt_backend_rmsnorm_fwd(c->be, y32.d, rs.d, x.d, w32.d, MT_F32, R, D, eps), "rmsnorm_fwd f32 w");
        oc_same(c, "rmsnorm_fwd bf16 w = f32 w", &y, &y32);
        oc_ok(c, mt_backend_rmsnorm_bwd(c->be, dx32.d, dw32.d, g.d, x.d, w32.d, rstd.d, MT_F32, R, D), "rmsnorm_bwd f32");
        oc_same(c, "rmsnorm_bwd bf16 dinp = f32", &dx, &dx32);
        float *h = oc_download(c, &dw32);
        oc_t dwr = oc_from(c, h, D, MT_BF16);
        oc_same(c, "rmsnorm_bwd bf16 dw = f32 rounded once", &dw, &dwr);
        free(h);
        oc_free(c, &w32), oc_free(c, &y32), oc_free(c, &rs), oc_free(c, &dx32), oc_free(c, &dw32), oc_free(c, &dwr);
    }
    oc_free(c, &x), oc_free(c, &w), oc_free(c, &g), oc_free(c, &y), oc_free(c, &rstd), oc_free(c, &dx), oc_free(c, &dw);
    free(ry), free(rr), free(rdx), free(rdw);
}

// The fused residual forms: sum = a + b (sum aliasing a, as layer.c calls it), out =
// rmsnorm(sum), and dacc += rmsnorm_bwd. p[0] shifts the activations by that many
// elements (1: misaligned rows, the scalar path). Bitwise: the unfused pair's values.
static void fam_fused_norm(oc_ctx *c, const oc_row *row) {
    int R = row->s.N, D = row->s.C;
    size_t n = (size_t)R * D, o = (size_t)row->p[0];
    float eps = 1e-6f;
    mt_dtype act = c->act, wdt = c->wdt;
    oc_t a = oc_new(c, o + n, act, -2, 2), b = oc_new(c, o + n, act, -2, 2), w = oc_new(c, D, wdt, 0.5f, 1.5f);
    oc_t out = oc_rand(c, o + n, act), rstd = oc_rand(c, R, MT_F32);
    float *a0 = malloc((o + n) * sizeof(float));
    memcpy(a0, a.h, (o + n) * sizeof(float));
    double *rsum = dz(o + n), *ry = dz(o + n), *rr = dz(R);
    float *sum = malloc((o + n) * sizeof(float)); // a + b as stored (rounded to the activation type)
    for (size_t i = 0; i < o + n; i++) {
        rsum[i] = i < o ? a.h[i] : (double)a.h[i] + b.h[i];
        sum[i] = i < o ? a.h[i] : a.h[i] + b.h[i];
        if (act == MT_BF16) sum[i] = mt_bf16_to_f32(mt_f32_to_bf16(sum[i]));
        if (i < o) ry[i] = out.h[i];
    }
    for (int r = 0; r < R; r++) rr[r] = ref_rms_row(ry + o + (size_t)r * D, sum + o + (size_t)r * D, w.h, D, eps);
    OC_RUN(c, "add_rmsnorm_fwd", 0,
           mt_backend_add_rmsnorm_fwd(c->be, oc_at(&a, o), oc_at(&out, o), rstd.d, oc_at(&a, o), oc_at(&b, o), w.d,
                                      wdt, R, D, eps));
    oc_close(c, "add_rmsnorm_fwd sum", &a, rsum, oc_tol(c, OC_BY_ACT, 1e-12, 1e-5));
    oc_close(c, "add_rmsnorm_fwd out", &out, ry, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "add_rmsnorm_fwd rstd", &rstd, rr, oc_tol(c, OC_BY_ACT, 1e-10, 1e-8));
    // backward from the stored sum and the reference's rstd on both sides
    oc_t s = oc_from(c, sum, o + n, act), rs = oc_rand(c, R, MT_F32);
    for (int r = 0; r < R; r++) rs.h[r] = (float)rr[r];
    oc_upload(c, &rs);
    oc_t dout = oc_rand(c, o + n, act), dacc = oc_rand(c, o + n, act), dw = oc_rand(c, D, wdt);
    double *rdacc = dz(o + n), *rdw = dz(D), *dxr = dz(D);
    for (size_t i = 0; i < o + n; i++) rdacc[i] = dacc.h[i];
    for (int r = 0; r < R; r++) {
        size_t k = o + (size_t)r * D;
        ref_rms_row_bwd(dxr, rdw, dout.h + k, s.h + k, w.h, D, eps);
        for (int i = 0; i < D; i++) rdacc[k + i] += dxr[i];
    }
    oc_t dacc0 = oc_from(c, dacc.h, o + n, act);
    OC_RUN(c, "rmsnorm_bwd_add", 0,
           mt_backend_rmsnorm_bwd_add(c->be, oc_at(&dacc, o), dw.d, oc_at(&dout, o), oc_at(&s, o), w.d, rs.d, wdt, R, D));
    oc_close(c, "rmsnorm_bwd_add dacc", &dacc, rdacc, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "rmsnorm_bwd_add dw", &dw, rdw, oc_tol(c, OC_BY_W, 1e-9, 1e-4));
    if (!c->perf) {
        mt_status st = mt_backend_rmsnorm_bwd_add(c->be, oc_at(&dacc, o), dw.d, oc_at(&dacc, o), oc_at(&s, o), w.d,
                                                  rs.d, wdt, R, D);
        oc_expect(c, st == MT_ERR_ARG, "rmsnorm_bwd_add refuses dacc aliasing dout");
    }
    // the unfused pair, bitwise: add then rmsnorm_fwd; rmsnorm_bwd into a temporary then add
    if (!c->perf && oc_supports(c, MT_OP_ADD_RMSNORM_FWD, MT_SHAPE_BITWISE) &&
        oc_supports(c, MT_OP_RMSNORM_BWD_ADD, MT_SHAPE_BITWISE)) {
        oc_t a1 = oc_from(c, a0, o + n, act), y1 = oc_from(c, out.h, o + n, act), r1 = oc_rand(c, R, MT_F32);
        oc_ok(c, mt_backend_add(c->be, oc_at(&a1, o), oc_at(&a1, o), oc_at(&b, o), n), "add");
        oc_ok(c, mt_backend_rmsnorm_fwd(c->be, oc_at(&y1, o), r1.d, oc_at(&a1, o), w.d, wdt, R, D, eps), "rmsnorm_fwd");
        oc_same(c, "add_rmsnorm_fwd sum = add", &a, &a1);
        oc_same(c, "add_rmsnorm_fwd out = rmsnorm_fwd", &out, &y1); // the shifted-off heads: the same values
        oc_same(c, "add_rmsnorm_fwd rstd = rmsnorm_fwd", &rstd, &r1);
        oc_t dx1 = oc_rand(c, o + n, act), dw1 = oc_rand(c, D, wdt);
        oc_ok(c, mt_backend_rmsnorm_bwd(c->be, oc_at(&dx1, o), dw1.d, oc_at(&dout, o), oc_at(&s, o), w.d, rs.d, wdt, R, D),
              "rmsnorm_bwd");
        oc_ok(c, mt_backend_add(c->be, oc_at(&dacc0, o), oc_at(&dacc0, o), oc_at(&dx1, o), n), "add");
        oc_same(c, "rmsnorm_bwd_add dacc = rmsnorm_bwd + add", &dacc, &dacc0);
        oc_same(c, "rmsnorm_bwd_add dw = rmsnorm_bwd", &dw, &dw1);
        oc_free(c, &a1), oc_free(c, &y1), oc_free(c, &r1), oc_free(c, &dx1), oc_free(c, &dw1);
    }
    oc_free(c, &a), oc_free(c, &b), oc_free(c, &w), oc_free(c, &out), oc_free(c, &rstd), oc_free(c, &s), oc_free(c, &rs);
    oc_free(c, &dout), oc_free(c, &dacc), oc_free(c, &dw), oc_free(c, &dacc0);
    free(a0), free(rsum), free(ry), free(rr), free(sum), free(rdacc), free(rdw), free(dxr);
}

// ---------------------------------------------------------------- qk_norm

static void fam_qk_norm(oc_ctx *c, const oc_row *row) {
    int N = row->s.N, NH = row->s.NH, NKV = row->s.NKV, HD = row->s.HD, QKV = NH + 2 * NKV, NQK = NH + NKV;
    float eps = 1e-6f;
    size_t n = (size_t)N * QKV * HD;
    mt_dtype act = c->act, wdt = c->wdt;
    oc_t x = oc_new(c, n, act, -2, 2), qw = oc_new(c, HD, wdt, 0.5f, 1.5f), kw = oc_new(c, HD, wdt, 0.5f, 1.5f);
    oc_t g = oc_rand(c, n, act), y = oc_rand(c, n, act), rstd = oc_rand(c, (size_t)N * NQK, MT_F32);
    oc_t dx = oc_rand(c, n, act), dq = oc_rand(c, HD, wdt), dk = oc_rand(c, HD, wdt);
    double *ry = dz(n), *rr = dz((size_t)N * NQK), *rdx = dz(n), *rdq = dz(HD), *rdk = dz(HD);
    for (int t = 0; t < N; t++)
        for (int h = 0; h < QKV; h++) {
            size_t o = ((size_t)t * QKV + h) * HD;
            if (h < NQK) {
                const float *w = h < NH ? qw.h : kw.h;
                rr[(size_t)t * NQK + h] = ref_rms_row(ry + o, x.h + o, w, HD, eps);
                ref_rms_row_bwd(rdx + o, h < NH ? rdq : rdk, g.h + o, x.h + o, w, HD, eps);
            } else {
                for (int d = 0; d < HD; d++) ry[o + d] = x.h[o + d], rdx[o + d] = g.h[o + d];
            }
        }
    OC_RUN(c, "qk_norm_fwd", 0, mt_backend_qk_norm_fwd(c->be, y.d, rstd.d, x.d, qw.d, kw.d, wdt, N, NH, NKV, HD, eps));
    oc_close(c, "qk_norm_fwd out", &y, ry, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "qk_norm_fwd rstd", &rstd, rr, 1e-10);
    OC_RUN(c, "qk_norm_bwd", 0,
           mt_backend_qk_norm_bwd(c->be, dx.d, dq.d, dk.d, g.d, x.d, qw.d, kw.d, rstd.d, wdt, N, NH, NKV, HD));
    oc_close(c, "qk_norm_bwd dinp", &dx, rdx, oc_tol(c, OC_BY_ACT, 1e-10, 1e-4));
    oc_close(c, "qk_norm_bwd dqw", &dq, rdq, oc_tol(c, OC_BY_W, 1e-9, 1e-4));
    oc_close(c, "qk_norm_bwd dkw", &dk, rdk, oc_tol(c, OC_BY_W, 1e-9, 1e-4));
    if (wdt == MT_BF16 && !c->perf && oc_supports(c, MT_OP_QK_NORM_FWD, MT_SHAPE_BITWISE) &&
        oc_supports(c, MT_OP_QK_NORM_BWD, MT_SHAPE_BITWISE)) {
        oc_t q32 = oc_from(c, qw.h, HD, MT_F32), k32 = oc_from(c, kw.h, HD, MT_F32), y32 = oc_rand(c, n, act);
        oc_t rs = oc_rand(c, (size_t)N * NQK, MT_F32), dx32 = oc_rand(c, n, act);
        oc_t dq32 = oc_rand(c, HD, MT_F32), dk32 = oc_rand(c, HD, MT_F32);
        oc_ok(c, mt_backend_qk_norm_fwd(c->be, y32.d, rs.d, x.d, q32.d, k32.d, MT_F32, N, NH, NKV, HD, eps), "f32 w");
        oc_same(c, "qk_norm_fwd bf16 w = f32 w", &y, &y32);
        oc_ok(c, mt_backend_qk_norm_bwd(c->be, dx32.d, dq32.d, dk32.d, g.d, x.d, q32.d, k32.d, rstd.d, MT_F32, N, NH,
                                        NKV, HD), "f32 w");
        oc_same(c, "qk_norm_bwd bf16 dinp = f32", &dx, &dx32);
        float *hq = oc_download(c, &dq32), *hk = oc_download(c, &dk32);
        oc_t qr = oc_from(c, hq, HD, MT_BF16), kr = oc_from(c, hk, HD, MT_BF16);
        oc_same(c, "qk_norm_bwd bf16 dqw = f32 rounded once", &dq, &qr);
        oc_same(c, "qk_norm_bwd bf16 dkw = f32 rounded once", &dk, &kr);
        free(hq), free(hk);
        oc_free(c, &q32), oc_free(c, &k32), oc_free(c, &y32), oc_free(c, &rs), oc_free(c, &dx32), oc_free(c, &dq32);
        oc_free(c, &dk32), oc_free(c, &qr), oc_free(c, &kr);
    }
    oc_free(c, &x), oc_free(c, &qw), oc_free(c, &kw), oc_free(c, &g), oc_free(c, &y), oc_free(c, &rstd);
    oc_free(c, &dx), oc_free(c, &dq), oc_free(c, &dk);
    free(ry), free(rr), free(rdx), free(rdq), free(rdk);
}

// ---------------------------------------------------------------- rope

static void rope_tables(oc_ctx *c, oc_t *cs, oc_t *sn, int T, int HD) {
    int half = HD / 2;
    *cs = oc_rand(c, (size_t)T * half, MT_F32), *sn = oc_rand(c, (size_t)T * half, MT_F32);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < half; j++) {
            double f = t * pow(10000.0, -2.0 * j / HD);
            cs->h[t * half + j] = (float)cos(f);
            sn->h[t * half + j] = (float)sin(f);
        }
    oc_upload(c, cs), oc_upload(c, sn);
}

static void fam_rope(oc_ctx *c, const oc_row *row) {
    int B = row->s.B, T = row->s.T, NH = row->s.NH, NKV = row->s.NKV, HD = row->s.HD, QKV = NH + 2 * NKV, half = HD / 2;
    size_t n = (size_t)B * T * QKV * HD;
    oc_t cs, sn;
    rope_tables(c, &cs, &sn, T, HD);
    oc_t x = oc_rand(c, n, c->act), g = oc_rand(c, n, c->act), y = oc_rand(c, n, c->act), dx = oc_rand(c, n, c->act);
    double *ry = dz(n), *rdx = dz(n);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < QKV; h++) {
                size_t o = (((size_t)b * T + t) * QKV + h) * HD;
                for (int j = 0; j < half; j++) {
                    double co = cs.h[t * half + j], s = sn.h[t * half + j];
                    const float *X = x.h + o, *G = g.h + o;
                    if (h < NH + NKV) { // rotate-half; backward is the transpose of the rotation
                        ry[o + j] = X[j] * co - X[j + half] * s;
                        ry[o + j + half] = X[j + half] * co + X[j] * s;
                        rdx[o + j] = G[j] * co + G[j + half] * s;
                        rdx[o + j + half] = G[j + half] * co - G[j] * s;
                    } else {
                        ry[o + j] = X[j], ry[o + j + half] = X[j + half];
                        rdx[o + j] = G[j], rdx[o + j + half] = G[j + half];
                    }
                }
            }
    double tol = oc_tol(c, OC_BY_ACT, 1e-12, 1e-4);
    OC_RUN(c, "rope_fwd", 0, mt_backend_rope_fwd(c->be, y.d, x.d, cs.d, sn.d, B, T, NH, NKV, HD));
    oc_close(c, "rope_fwd", &y, ry, tol);
    OC_RUN(c, "rope_bwd", 0, mt_backend_rope_bwd(c->be, dx.d, g.d, cs.d, sn.d, B, T, NH, NKV, HD));
    oc_close(c, "rope_bwd", &dx, rdx, tol);
    if (!c->perf && oc_supports(c, MT_OP_ROPE_FWD, MT_SHAPE_IN_PLACE) && oc_supports(c, MT_OP_ROPE_BWD, MT_SHAPE_IN_PLACE)) {
        oc_ok(c, mt_backend_rope_fwd(c->be, x.d, x.d, cs.d, sn.d, B, T, NH, NKV, HD), "rope_fwd in place");
        oc_same(c, "rope_fwd in place", &x, &y);
        oc_ok(c, mt_backend_rope_bwd(c->be, g.d, g.d, cs.d, sn.d, B, T, NH, NKV, HD), "rope_bwd in place (layer.c)");
        oc_same(c, "rope_bwd in place", &g, &dx);
    }
    oc_free(c, &cs), oc_free(c, &sn), oc_free(c, &x), oc_free(c, &g), oc_free(c, &y), oc_free(c, &dx);
    free(ry), free(rdx);
}

// ---------------------------------------------------------------- attention

// Full-matrix double reference: out, lse and dqkv (packed) for causal GQA attention.
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
                double mx = -INFINITY, *Pi = P + (size_t)i * T;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < HD; d++) s += (double)Q(i, d) * K(j, d);
                    Pi[j] = s * scale;
                    if (Pi[j] > mx) mx = Pi[j];
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) sum += exp(Pi[j] - mx);
                for (int j = 0; j <= i; j++) Pi[j] = exp(Pi[j] - mx) / sum;
                lse[((size_t)b * NH + h) * T + i] = mx + log(sum);
                for (int d = 0; d < HD; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) o += Pi[j] * V(j, d);
                    out[(((size_t)b * T + i) * NH + h) * HD + d] = o;
                }
                double Di = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < HD; d++) s += (double)DO(i, d) * V(j, d);
                    dP[j] = s;
                    Di += Pi[j] * s;
                }
                for (int j = 0; j <= i; j++) {
                    double p = Pi[j], ds = p * (dP[j] - Di);
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

// One of dq, dk, dv (part 0, 1, 2) of packed (B*T, QKV*HD) rows, so a small part cannot hide in the total.
static void qkv_part(oc_ctx *c, const char *what, const oc_t *dqkv, const double *rd, int BT, int NH, int NKV, int HD,
                     int part, double tol) {
    int QKV = NH + 2 * NKV, h0 = part == 0 ? 0 : part == 1 ? NH : NH + NKV, nh = part == 0 ? NH : NKV;
    size_t m = (size_t)BT * nh * HD, k = 0;
    float *all = oc_download(c, dqkv), *a = malloc(m * sizeof(float));
    double *r = dz(m);
    for (size_t bt = 0; bt < (size_t)BT; bt++)
        for (int i = 0; i < nh * HD; i++, k++) {
            a[k] = all[bt * QKV * HD + (size_t)h0 * HD + i];
            r[k] = rd[bt * QKV * HD + (size_t)h0 * HD + i];
        }
    oc_t t = oc_from(c, a, m, MT_F32); // f32 holds the backend's values exactly
    oc_close(c, what, &t, r, tol);
    oc_free(c, &t);
    free(all), free(a), free(r);
}

// Forward and backward against the reference; the backward reads the backend's own
// (out, lse). Where the backend has several implementations and this run is not its
// native one, the native backward of a second instance from this one's forward (the lse
// contract between them) must match too.
static void fam_attention(oc_ctx *c, const oc_row *row) {
    int B = row->s.B, T = row->s.T, NH = row->s.NH, NKV = row->s.NKV, HD = row->s.HD;
    size_t nq = (size_t)B * T * (NH + 2 * NKV) * HD, no = (size_t)B * T * NH * HD, nl = (size_t)B * NH * T;
    mt_dtype act = c->act;
    oc_t qkv = oc_new(c, nq, act, -2, 2), out = oc_rand(c, no, act), lse = oc_rand(c, nl, MT_F32);
    oc_t dout = oc_rand(c, no, act), dqkv = oc_new(c, nq, act, -9, 9);
    double *ro = dz(no), *rl = dz(nl), *rd = dz(nq);
    if (!c->perf) ref_attention(ro, rl, rd, qkv.h, dout.h, B, T, NH, NKV, HD);
    double flops = 2.0 * B * NH * (double)T * T * HD; // causal: QK^T and PV over half the square
    OC_RUN(c, "attention_fwd", flops, mt_backend_attention_fwd(c->be, out.d, lse.d, qkv.d, B, T, NH, NKV, HD));
    oc_close(c, "attention_fwd out", &out, ro, oc_tol(c, OC_BY_ACT, 1e-9, 5e-4));
    oc_close(c, "attention_fwd lse", &lse, rl, oc_tol(c, OC_BY_ACT, 1e-9, 1e-6));
    OC_RUN(c, "attention_bwd", 2.5 * flops,
           mt_backend_attention_bwd(c->be, dqkv.d, dout.d, qkv.d, out.d, lse.d, B, T, NH, NKV, HD));
    double tb = oc_tol(c, OC_BY_ACT, 1e-8, 2e-3);
    oc_close(c, "attention_bwd dqkv", &dqkv, rd, tb);
    if (!c->perf && c->act == MT_F32) { // bf16: the total's limit was set for the whole, not each part
        qkv_part(c, "attention_bwd dq", &dqkv, rd, B * T, NH, NKV, HD, 0, tb);
        qkv_part(c, "attention_bwd dk", &dqkv, rd, B * T, NH, NKV, HD, 1, tb);
        qkv_part(c, "attention_bwd dv", &dqkv, rd, B * T, NH, NKV, HD, 2, tb);
    }
    if (!c->perf && c->impl != MT_ATTN_AUTO && c->impl != MT_ATTN_NATIVE) {
        mt_backend *nat = NULL;
        mt_backend_args a = {act, NULL, 0};
        if (oc_ok(c, c->entry->create(&a, &nat), "a second instance") &&
            oc_ok(c, mt_backend_set_attention(nat, MT_ATTN_NATIVE), "--attention native")) {
            oc_t dn = oc_rand(c, nq, act);
            oc_sync(c);
            oc_ok(c, mt_backend_attention_bwd(nat, dn.d, dout.d, qkv.d, out.d, lse.d, B, T, NH, NKV, HD),
                  "native attention_bwd from this forward");
            oc_ok(c, mt_backend_stream_sync(nat, MT_STREAM_COMPUTE), "sync");
            oc_close(c, "native attention_bwd after this implementation's forward", &dn, rd, tb);
            oc_free(c, &dn);
        }
        mt_backend_destroy(nat);
    }
    oc_free(c, &qkv), oc_free(c, &out), oc_free(c, &lse), oc_free(c, &dout), oc_free(c, &dqkv);
    free(ro), free(rl), free(rd);
}

// Rerun the backward: bitwise the same (a deterministic implementation: the variant that asks for one).
static void fam_attention_repeat(oc_ctx *c, const oc_row *row) {
    int B = row->s.B, T = row->s.T, NH = row->s.NH, NKV = row->s.NKV, HD = row->s.HD;
    size_t nq = (size_t)B * T * (NH + 2 * NKV) * HD, no = (size_t)B * T * NH * HD;
    oc_t qkv = oc_new(c, nq, c->act, -2, 2), out = oc_rand(c, no, c->act), lse = oc_rand(c, (size_t)B * NH * T, MT_F32);
    oc_t dout = oc_rand(c, no, c->act), d1 = oc_rand(c, nq, c->act), d2 = oc_rand(c, nq, c->act);
    double *ro = dz(no), *rl = dz((size_t)B * NH * T), *rd = dz(nq);
    ref_attention(ro, rl, rd, qkv.h, dout.h, B, T, NH, NKV, HD);
    oc_ok(c, mt_backend_attention_fwd(c->be, out.d, lse.d, qkv.d, B, T, NH, NKV, HD), "attention_fwd");
    oc_ok(c, mt_backend_attention_bwd(c->be, d1.d, dout.d, qkv.d, out.d, lse.d, B, T, NH, NKV, HD), "attention_bwd");
    oc_ok(c, mt_backend_attention_bwd(c->be, d2.d, dout.d, qkv.d, out.d, lse.d, B, T, NH, NKV, HD), "again");
    oc_close(c, "attention_bwd dqkv", &d1, rd, oc_tol(c, OC_BY_ACT, 1e-8, 2e-3));
    if (c->variant || oc_supports(c, MT_OP_ATTENTION_BWD, MT_SHAPE_BITWISE)) // reproducible: said, or asked for
        oc_same(c, "attention_bwd run to run", &d1, &d2);
    oc_free(c, &qkv), oc_free(c, &out), oc_free(c, &lse), oc_free(c, &dout), oc_free(c, &d1), oc_free(c, &d2);
    free(ro), free(rl), free(rd);
}

// Long causal attention with tiny heads: must run in seconds with O(tile) scratch. Checks
// sampled rows of out, lse and dq (each depends on its own query row only) against the
// double reference, and that dk, dv are finite.
static void fam_attention_long(oc_ctx *c, const oc_row *row) {
    int B = 1, T = row->s.T, NH = row->s.NH, NKV = row->s.NKV, HD = row->s.HD, QKV = NH + 2 * NKV, G = NH / NKV;
    size_t nqkv = (size_t)T * QKV * HD, no = (size_t)T * NH * HD;
    oc_t qkv = oc_new(c, nqkv, c->act, -1.5f, 1.5f), dout = oc_rand(c, no, c->act), out = oc_rand(c, no, c->act);
    oc_t lse = oc_rand(c, (size_t)NH * T, MT_F32), dqkv = oc_rand(c, nqkv, c->act);
    double t0 = oc_now_s();
    oc_ok(c, mt_backend_attention_fwd(c->be, out.d, lse.d, qkv.d, B, T, NH, NKV, HD), "attention_fwd");
    oc_sync(c);
    double t1 = oc_now_s();
    oc_ok(c, mt_backend_attention_bwd(c->be, dqkv.d, dout.d, qkv.d, out.d, lse.d, B, T, NH, NKV, HD), "attention_bwd");
    oc_sync(c);
    fprintf(stderr, "  %s: attention T=%d NH=%d NKV=%d HD=%d: fwd %.2f s, bwd %.2f s\n", c->cfg, T, NH, NKV, HD,
            t1 - t0, oc_now_s() - t1);
    if (c->perf) goto done;
    float *o = oc_download(c, &out), *l = oc_download(c, &lse), *dq = oc_download(c, &dqkv);
    const float *q = qkv.h, *g = dout.h;
    const int rows[] = {0, 1, 63, 64, 1000, 8191, 12345, T - 1};
    double scale = 1.0 / sqrt((double)HD), *p = malloc(sizeof(double) * T);
    size_t per = (size_t)NH * HD;
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
        int i = rows[ri];
        if (i >= T) continue;
        double *ref = dz(2 * per + NH);
        float *got = malloc((2 * per + NH) * sizeof(float));
        for (int h = 0, k = 0; h < NH; h++) {
            int kvh = h / G;
            const float *qi = q + ((size_t)i * QKV + h) * HD, *gi = g + ((size_t)i * NH + h) * HD;
            double mx = -INFINITY, sum = 0, Di = 0, acc[256] = {0}, dqr[256] = {0};
            for (int j = 0; j <= i; j++) {
                const float *kk = q + ((size_t)j * QKV + NH + kvh) * HD;
                double s = 0;
                for (int d = 0; d < HD; d++) s += (double)qi[d] * kk[d];
                p[j] = s * scale;
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
            for (int j = 0; j <= i; j++) {
                p[j] /= sum;
                const float *v = q + ((size_t)j * QKV + NH + NKV + kvh) * HD;
                for (int d = 0; d < HD; d++) acc[d] += p[j] * v[d];
            }
            for (int d = 0; d < HD; d++) Di += acc[d] * gi[d];
            for (int j = 0; j <= i; j++) {
                const float *v = q + ((size_t)j * QKV + NH + NKV + kvh) * HD, *kk = q + ((size_t)j * QKV + NH + kvh) * HD;
                double dp = 0;
                for (int d = 0; d < HD; d++) dp += (double)gi[d] * v[d];
                for (int d = 0; d < HD; d++) dqr[d] += scale * p[j] * (dp - Di) * kk[d];
            }
            for (int d = 0; d < HD; d++, k++) {
                got[k] = o[((size_t)i * NH + h) * HD + d], ref[k] = acc[d];
                got[per + k] = dq[((size_t)i * QKV + h) * HD + d], ref[per + k] = dqr[d];
            }
            got[2 * per + h] = l[(size_t)h * T + i], ref[2 * per + h] = mx + log(sum);
        }
        char what[96];
        oc_t t = oc_from(c, got, per, MT_F32);
        snprintf(what, sizeof what, "attention T=%d row %d out", T, i);
        oc_close(c, what, &t, ref, 1e-9);
        oc_free(c, &t);
        t = oc_from(c, got + per, per, MT_F32);
        snprintf(what, sizeof what, "attention T=%d row %d dq", T, i);
        oc_close(c, what, &t, ref + per, 1e-8);
        oc_free(c, &t);
        t = oc_from(c, got + 2 * per, NH, MT_F32);
        snprintf(what, sizeof what, "attention T=%d row %d lse", T, i);
        oc_close(c, what, &t, ref + 2 * per, 1e-9);
        oc_free(c, &t);
        free(ref), free(got);
    }
    int finite = 1;
    for (size_t i = 0; i < nqkv; i++) finite &= isfinite(dq[i]) != 0;
    oc_expect(c, finite, "attention long: dqkv all finite");
    free(o), free(l), free(dq), free(p);
done:
    oc_free(c, &qkv), oc_free(c, &dout), oc_free(c, &out), oc_free(c, &lse), oc_free(c, &dqkv);
}

// ---------------------------------------------------------------- elementwise

static void fam_swiglu(oc_ctx *c, const oc_row *row) {
    int N = row->s.N, F = row->s.C;
    oc_t gu = oc_new(c, (size_t)N * 2 * F, c->act, -4, 4), dh = oc_rand(c, (size_t)N * F, c->act);
    oc_t h = oc_rand(c, (size_t)N * F, c->act), dgu = oc_rand(c, (size_t)N * 2 * F, c->act);
    double *rh = dz((size_t)N * F), *rd = dz((size_t)N * 2 * F);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            double g = gu.h[(size_t)n * 2 * F + i], u = gu.h[(size_t)n * 2 * F + F + i], d = dh.h[(size_t)n * F + i];
            double sig = 1.0 / (1.0 + exp(-g));
            rh[(size_t)n * F + i] = g * sig * u;
            rd[(size_t)n * 2 * F + i] = d * u * (sig + g * sig * (1 - sig));
            rd[(size_t)n * 2 * F + F + i] = d * g * sig;
        }
    double tol = oc_tol(c, OC_BY_ACT, 1e-10, 1e-4);
    OC_RUN(c, "swiglu_fwd", 0, mt_backend_swiglu_fwd(c->be, h.d, gu.d, N, F));
    oc_close(c, "swiglu_fwd", &h, rh, tol);
    OC_RUN(c, "swiglu_bwd", 0, mt_backend_swiglu_bwd(c->be, dgu.d, dh.d, gu.d, N, F));
    oc_close(c, "swiglu_bwd", &dgu, rd, tol);
    oc_free(c, &gu), oc_free(c, &dh), oc_free(c, &h), oc_free(c, &dgu);
    free(rh), free(rd);
}

static void fam_add(oc_ctx *c, const oc_row *row) {
    size_t n = (size_t)row->s.N;
    oc_t a = oc_rand(c, n, c->act), b = oc_rand(c, n, c->act), o = oc_rand(c, n, c->act);
    double *r = dz(n);
    for (size_t i = 0; i < n; i++) r[i] = (double)a.h[i] + b.h[i];
    OC_RUN(c, "add", 0, mt_backend_add(c->be, o.d, a.d, b.d, n));
    oc_close(c, "add", &o, r, oc_tol(c, OC_BY_ACT, 1e-12, 1e-4));
    if (!c->perf && oc_supports(c, MT_OP_ADD, MT_SHAPE_IN_PLACE)) {
        oc_ok(c, mt_backend_add(c->be, a.d, a.d, b.d, n), "add in place"); // out aliases a
        oc_same(c, "add in place", &a, &o);
    }
    oc_free(c, &a), oc_free(c, &b), oc_free(c, &o);
    free(r);
}

// Casts against the host conversion: f32 -> bf16, bf16 -> f32, f32 -> f32 and the round
// trip through the activation type, all exact (the lengths: whole units' numel, odd).
static void fam_cast(oc_ctx *c, const oc_row *row) {
    size_t n = (size_t)row->s.N;
    mt_op_shape s = c->s;
    oc_t x = oc_new(c, n, MT_F32, -100, 100), b = oc_rand(c, n, MT_BF16), y = oc_rand(c, n, MT_F32);
    oc_t e = oc_from(c, x.h, n, MT_BF16); // the host's rounding
    double *r = dz(n);
    s.act = MT_BF16, s.wdt = MT_F32;
    if (mt_backend_supports_shape(c->be, MT_OP_CAST, &s)) {
        OC_RUN(c, "cast f32->bf16", 0, mt_backend_cast(c->be, b.d, MT_BF16, x.d, MT_F32, n));
        oc_same(c, "cast f32->bf16", &b, &e);
        s.act = MT_F32, s.wdt = MT_BF16;
        if (mt_backend_supports_shape(c->be, MT_OP_CAST, &s)) {
            oc_ok(c, mt_backend_cast(c->be, y.d, MT_F32, b.d, MT_BF16, n), "cast bf16->f32");
            for (size_t i = 0; i < n; i++) r[i] = e.h[i];
            oc_close(c, "cast bf16->f32 (exact)", &y, r, 0.0);
        }
    }
    s.act = MT_F32, s.wdt = MT_F32;
    if (mt_backend_supports_shape(c->be, MT_OP_CAST, &s)) {
        oc_ok(c, mt_backend_cast(c->be, y.d, MT_F32, x.d, MT_F32, n), "cast f32->f32");
        oc_same(c, "cast f32->f32", &y, &x);
    }
    s.act = c->act, s.wdt = MT_F32;
    if (mt_backend_supports_shape(c->be, MT_OP_CAST, &s)) { // f32 -> activations -> f32
        oc_t mid = oc_rand(c, n, c->act), back = oc_rand(c, n, MT_F32);
        oc_ok(c, mt_backend_cast(c->be, mid.d, c->act, x.d, MT_F32, n), "cast to act");
        oc_ok(c, mt_backend_cast(c->be, back.d, MT_F32, mid.d, c->act, n), "cast back");
        for (size_t i = 0; i < n; i++) r[i] = c->act == MT_BF16 ? e.h[i] : x.h[i];
        oc_close(c, "cast round trip through the activation type", &back, r, 0.0);
        oc_free(c, &mid), oc_free(c, &back);
    }
    oc_free(c, &x), oc_free(c, &b), oc_free(c, &y), oc_free(c, &e);
    free(r);
}

// Softmax cross-entropy in place on logits(n,V) in chunks of R rows (p[0]; 0: one call),
// the losses/targets pointers offset as the loss head does. p[1]: logit offset (80: exp
// would overflow without the max shift), p[2]: half-width of the logit range.
static void fam_xent(oc_ctx *c, const oc_row *row) {
    int n = row->s.N, V = row->s.V, R = row->p[0] ? row->p[0] : n;
    float off = (float)row->p[1], w = (float)row->p[2];
    oc_t logits = oc_new(c, (size_t)n * V, c->act, -w + off, w + off), losses = oc_rand(c, n, MT_F32);
    int32_t *tg = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++) tg[i] = (int32_t)(((unsigned)i * 2654435761u) % (unsigned)V);
    int32_t *tgd = oc_ids(c, tg, n);
    float dscale = 1.0f / n;
    double *rl = dz(n), *rg = dz((size_t)n * V);
    for (int i = 0; i < n; i++) {
        const float *x = logits.h + (size_t)i * V;
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < V; j++) s += exp(x[j] - mx);
        rl[i] = mx + log(s) - x[tg[i]];
        for (int j = 0; j < V; j++) rg[(size_t)i * V + j] = dscale * (exp(x[j] - mx) / s - (j == tg[i]));
    }
    for (int r0 = 0; r0 < n; r0 += R) {
        int m = n - r0 < R ? n - r0 : R;
        OC_RUN(c, "xent_fwd_bwd", 0,
               mt_backend_xent_fwd_bwd(c->be, oc_at(&logits, (size_t)r0 * V), (float *)losses.d + r0, tgd + r0, m, V,
                                       dscale));
    }
    oc_close(c, "xent losses", &losses, rl, 1e-10);
    oc_close(c, "xent dlogits", &logits, rg, oc_tol(c, OC_BY_ACT, 1e-9, 1e-4));
    // a target out of range: a backend that runs in the caller's thread can say so
    if (!c->perf && !mt_backend_has(c->be, MT_CAP_ASYNC)) {
        tg[0] = V;
        int32_t *bad = oc_ids(c, tg, n);
        oc_expect(c, mt_backend_xent_fwd_bwd(c->be, logits.d, losses.d, bad, n, V, dscale) == MT_ERR_ARG,
                  "xent refuses target == V");
        oc_ids_free(c, bad);
    }
    oc_ids_free(c, tgd);
    free(tg), free(rl), free(rg);
    oc_free(c, &logits), oc_free(c, &losses);
}

// Token ids with repeats: p[0] picks the pattern (0: small strides, the last = the first;
// 1: a multiplicative hash; 2: the hash of a frequent-token run).
static int32_t *make_ids(int N, int V, int pattern) {
    int32_t *ids = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++)
        ids[i] = pattern == 0   ? (int32_t)(((unsigned)i * 37u + (unsigned)(i % 3) * 5u) % (unsigned)V)
                 : pattern == 1 ? (int32_t)(((unsigned)i * 40503u + 7u) % (unsigned)V)
                                : (int32_t)(((unsigned)i * 2654435761u >> 7) % (unsigned)V);
    if (pattern == 0) ids[N - 1] = ids[0];
    return ids;
}

// Forward gather and backward scatter-add onto a prefilled dwte (a tied head's gradient).
// bf16 (bitwise, where the backend says): each row summed in f32 in token order from its
// current value, rounded once.
static void fam_embedding(oc_ctx *c, const oc_row *row) {
    int V = row->s.V, N = row->s.N, C = row->s.C;
    int32_t *ids = make_ids(N, V, row->p[0]), *idd = oc_ids(c, ids, N);
    oc_t wte = oc_rand(c, (size_t)V * C, c->wdt), out = oc_rand(c, (size_t)N * C, c->act);
    oc_t dout = oc_rand(c, (size_t)N * C, c->act), dw = oc_rand(c, (size_t)V * C, c->wdt);
    double *ro = dz((size_t)N * C), *rdw = dz((size_t)V * C);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++) ro[(size_t)n * C + k] = wte.h[(size_t)ids[n] * C + k];
    for (size_t i = 0; i < (size_t)V * C; i++) rdw[i] = dw.h[i];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++) rdw[(size_t)ids[n] * C + k] += dout.h[(size_t)n * C + k];
    OC_RUN(c, "embedding_fwd", 0, mt_backend_embedding_fwd(c->be, out.d, idd, wte.d, c->wdt, N, C));
    oc_close(c, "embedding_fwd", &out, ro, oc_tol(c, OC_BY_ACT, 0.0, 1e-4));
    oc_t exact = oc_from(c, dw.h, (size_t)V * C, c->wdt);
    OC_RUN(c, "embedding_bwd", 0, mt_backend_embedding_bwd(c->be, dw.d, c->wdt, idd, dout.d, N, C));
    oc_close(c, "embedding_bwd (accumulate)", &dw, rdw, oc_tol(c, OC_BY_W, 1e-10, 1e-4));
    if (c->wdt == MT_BF16 && !c->perf && oc_supports(c, MT_OP_EMBEDDING_BWD, MT_SHAPE_BITWISE)) {
        for (int v = 0; v < V; v++)
            for (int k = 0; k < C; k++) {
                float acc = exact.h[(size_t)v * C + k];
                for (int n = 0; n < N; n++)
                    if (ids[n] == v) acc += dout.h[(size_t)n * C + k];
                exact.h[(size_t)v * C + k] = acc;
            }
        oc_upload(c, &exact); // rounded once, to bf16
        oc_same(c, "embedding_bwd bf16 = the f32 sum rounded once", &dw, &exact);
    }
    oc_ids_free(c, idd);
    free(ids), free(ro), free(rdw);
    oc_free(c, &wte), oc_free(c, &out), oc_free(c, &dout), oc_free(c, &dw), oc_free(c, &exact);
}

// Backward with many repeats of few ids (a frequent token): one rounding of an f32 sum per
// row (nmse ~1e-6 in bf16; rounding each add would be ~1e-3), C not a multiple of 256.
// p[1] = 0: dwte zeroed with memset_zero on the compute stream first (untied); 1: it holds
// a tied head's gradient.
static void fam_embedding_repeats(oc_ctx *c, const oc_row *row) {
    int V = row->s.V, N = row->s.N, C = row->s.C, tied = row->p[1];
    int32_t *ids = make_ids(N, V, 2), *idd = oc_ids(c, ids, N);
    oc_t dout = oc_rand(c, (size_t)N * C, c->act), dw = oc_rand(c, (size_t)V * C, c->wdt);
    double *r = dz((size_t)V * C);
    if (!tied) {
        memset(dw.h, 0, (size_t)V * C * sizeof(float));
        oc_ok(c, mt_backend_memset_zero(c->be, dw.d, (size_t)V * C * mt_dtype_size(c->wdt), MT_STREAM_COMPUTE),
              "memset_zero");
    }
    for (size_t i = 0; i < (size_t)V * C; i++) r[i] = dw.h[i];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++) r[(size_t)ids[n] * C + k] += dout.h[(size_t)n * C + k];
    OC_RUN(c, "embedding_bwd", 0, mt_backend_embedding_bwd(c->be, dw.d, c->wdt, idd, dout.d, N, C));
    oc_close(c, tied ? "embedding_bwd repeats (tied)" : "embedding_bwd repeats (zeroed)", &dw, r,
             oc_tol(c, OC_BY_W, 1e-10, 2e-5));
    oc_ids_free(c, idd);
    free(ids), free(r);
    oc_free(c, &dout), oc_free(c, &dw);
}

// A kernel that uses the backend's scratch, then (no host sync between) one that needs a
// larger scratch: the growth must not free memory still being read. On a fresh backend.
static void fam_scratch_growth(oc_ctx *c, const oc_row *row) {
    (void)row;
    int R = 300, D = 64, V = 11, N = 200000, C = 32; // 3 N int32 > a first 1 MiB scratch
    oc_t inp = oc_new(c, (size_t)R * D, c->act, -2, 2), w = oc_new(c, D, MT_F32, 0.5f, 1.5f), rstd = oc_rand(c, R, MT_F32);
    oc_t out = oc_rand(c, (size_t)R * D, c->act), dout = oc_rand(c, (size_t)R * D, c->act);
    oc_t dinp = oc_rand(c, (size_t)R * D, c->act), dw = oc_rand(c, D, MT_F32);
    int32_t *ids = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((unsigned)i * 7919u % (unsigned)V);
    int32_t *idd = oc_ids(c, ids, N);
    oc_t edout = oc_rand(c, (size_t)N * C, c->act), dwte = oc_rand(c, (size_t)V * C, MT_F32);
    double *rdw = dz(D), *dx = dz(D), *re = dz((size_t)V * C);
    for (int r = 0; r < R; r++) ref_rms_row_bwd(dx, rdw, dout.h + (size_t)r * D, inp.h + (size_t)r * D, w.h, D, 1e-6);
    for (size_t i = 0; i < (size_t)V * C; i++) re[i] = dwte.h[i];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++) re[(size_t)ids[n] * C + k] += edout.h[(size_t)n * C + k];
    oc_ok(c, mt_backend_rmsnorm_fwd(c->be, out.d, rstd.d, inp.d, w.d, MT_F32, R, D, 1e-6f), "rmsnorm_fwd");
    oc_ok(c, mt_backend_rmsnorm_bwd(c->be, dinp.d, dw.d, dout.d, inp.d, w.d, rstd.d, MT_F32, R, D), "rmsnorm_bwd");
    oc_ok(c, mt_backend_embedding_bwd(c->be, dwte.d, MT_F32, idd, edout.d, N, C), "embedding_bwd (grows the scratch)");
    oc_close(c, "scratch growth: rmsnorm_bwd dw", &dw, rdw, 1e-9);
    oc_close(c, "scratch growth: embedding_bwd", &dwte, re, 1e-10);
    oc_ids_free(c, idd);
    free(ids), free(rdw), free(dx), free(re);
    oc_free(c, &inp), oc_free(c, &w), oc_free(c, &rstd), oc_free(c, &out), oc_free(c, &dout), oc_free(c, &dinp);
    oc_free(c, &dw), oc_free(c, &edout), oc_free(c, &dwte);
}

// ---------------------------------------------------------------- the table

#define MM(N_, IC, OC_, why) {"matmul", fam_matmul, MT_OP_MATMUL_FWD, {.N = N_, .C = IC, .OC = OC_}, {0}, OC_W_BOTH, 0, why}
#define MMC(N_, IC, OC_, R, off, why)                                                                                 \
    {"matmul_chunked", fam_matmul_chunked, MT_OP_MATMUL_BWD, {.N = N_, .C = IC, .OC = OC_}, {R, off}, OC_W_BOTH, 0, why}
#define RMS(R, D, why) {"rmsnorm", fam_rmsnorm, MT_OP_RMSNORM_FWD, {.N = R, .C = D}, {0}, OC_W_BOTH, 0, why}
#define FUSED(R, D, off, why) {"fused_norm", fam_fused_norm, MT_OP_ADD_RMSNORM_FWD, {.N = R, .C = D}, {off}, OC_W_BOTH, 0, why}
#define QKN(N_, NH_, NKV_, HD_, why)                                                                                  \
    {"qk_norm", fam_qk_norm, MT_OP_QK_NORM_FWD, {.N = N_, .NH = NH_, .NKV = NKV_, .HD = HD_}, {0}, OC_W_BOTH, 0, why}
#define ROPE(B_, T_, NH_, NKV_, HD_, why)                                                                             \
    {"rope", fam_rope, MT_OP_ROPE_FWD, {.B = B_, .T = T_, .NH = NH_, .NKV = NKV_, .HD = HD_}, {0}, 0, 0, why}
#define ATT(B_, T_, NH_, NKV_, HD_, fl, why)                                                                          \
    {"attention", fam_attention, MT_OP_ATTENTION_FWD, {.B = B_, .T = T_, .NH = NH_, .NKV = NKV_, .HD = HD_}, {0}, 0, fl, why}
#define SWI(N_, F, why) {"swiglu", fam_swiglu, MT_OP_SWIGLU_FWD, {.N = N_, .C = F}, {0}, 0, 0, why}
#define ADD(n, why) {"add", fam_add, MT_OP_ADD, {.N = n}, {0}, 0, 0, why}
#define CAST(n, why) {"cast", fam_cast, MT_OP_CAST, {.N = n}, {0}, 0, 0, why}
#define XENT(n, V_, R, off, w, why) {"xent", fam_xent, MT_OP_XENT_FWD_BWD, {.N = n, .V = V_}, {R, off, w}, 0, 0, why}
#define EMB(V_, N_, C_, pat, wd, why)                                                                                 \
    {"embedding", fam_embedding, MT_OP_EMBEDDING_FWD, {.N = N_, .C = C_, .V = V_}, {pat}, wd, 0, why}
#define EMBR(V_, N_, C_, tied, why)                                                                                   \
    {"embedding_repeats", fam_embedding_repeats, MT_OP_EMBEDDING_BWD, {.N = N_, .C = C_, .V = V_}, {0, tied}, OC_W_BOTH, 0, why}

const oc_row mt_op_cases[] = {
    {"scratch_growth", fam_scratch_growth, MT_OP_EMBEDDING_BWD, {.N = 200000, .C = 32, .V = 11}, {0}, 0, OC_FRESH,
     "first on a fresh backend: a kernel's scratch grows while an earlier one may still read it"},
    MM(37, 48, 40, "odd sizes"),
    MM(1, 7, 3, "a single row"),
    MM(130, 64, 200, "more rows than a tile"),
    MM(96, 80, 136, "128-bit rows"),
    MM(200, 256, 64, "K a multiple of 256"),
    MM(33, 17, 29, "odd shapes, unaligned rows (bf16: the GEMM fallback may take it)"),
    MMC(50, 64, 96, 16, 0, "MLP chunks: 16, 16, 16, 2"),
    MMC(37, 64, 40, 10, 1, "misaligned row pointers"),
    RMS(37, 96, "odd rows"),
    RMS(2000, 64, "more rows than reduction blocks"),
    RMS(37, 200, "D a multiple of 8: 128-bit rows"),
    FUSED(37, 96, 0, "odd rows"),
    FUSED(2000, 70, 0, "many rows, D % 8 != 0"),
    FUSED(37, 200, 0, "D a multiple of 8: 128-bit rows"),
    FUSED(19, 100, 0, "bf16: D % 8 != 0, scalar rows"),
    FUSED(23, 64, 1, "misaligned rows: scalar"),
    QKN(37, 4, 2, 16, "GQA, small heads"),
    QKN(74, 4, 2, 32, "more tokens"),
    QKN(19, 4, 2, 64, "head dim 64"),
    ROPE(2, 37, 4, 2, 16, "B=2, odd T"),
    ROPE(1, 70, 2, 1, 32, "MQA"),
    ROPE(2, 13, 4, 2, 32, "short T"),
    ROPE(3, 13, 4, 2, 32, "B=3 (rope_bwd in place, as layer.c)"),
    ROPE(2, 9, 2, 1, 20, "HD/2 = 10: the scalar RoPE"),
    ATT(2, 37, 4, 2, 16, 0, "GQA, odd T, B=2"),
    ATT(1, 150, 4, 2, 32, 0, "T > tile, not a tile multiple"),
    ATT(1, 130, 2, 1, 16, 0, "all heads share one kv head"),
    ATT(2, 64, 2, 2, 8, 0, "MHA, exactly one tile"),
    ATT(1, 1, 4, 2, 16, 0, "a single token"),
    ATT(1, 200, 8, 2, 64, 0, "wide heads, G = 4"),
    ATT(3, 45, 4, 1, 64, 0, "B > 1, odd T, rep 4 (mma for bf16); cuDNN MQA"),
    ATT(2, 67, 2, 2, 128, 0, "B > 1, T = one tile + 3"),
    ATT(3, 19, 4, 2, 32, 0, "B > 1, T < tile"),
    ATT(2, 77, 4, 2, 64, 0, "GQA, tail tile, mma path for bf16; cuDNN odd T"),
    ATT(1, 130, 2, 1, 128, 0, "HD 128, T not a multiple of 64"),
    ATT(1, 70, 6, 2, 96, 0, "rep 3"),
    ATT(2, 5, 2, 1, 32, 0, "T shorter than a tile"),
    ATT(1, 33, 3, 3, 40, 0, "odd head size: the simple path for both dtypes"),
    ATT(1, 300, 2, 2, 80, OC_HEAVY, "simple path, several tiles"),
    ATT(1, 130, 8, 2, 128, 0, "HD 128, rep 4, T just past a 128 tile"),
    ATT(1, 257, 4, 4, 128, OC_HEAVY, "MHA, odd T"),
    ATT(2, 512, 8, 2, 64, OC_HEAVY, "T a multiple of 128"),
    ATT(1, 1000, 4, 2, 128, OC_HEAVY, "several tiles, T % 128 != 0"),
    ATT(2, 5, 2, 1, 64, 0, "T shorter than any tile (HD 64)"),
    {"attention_repeat", fam_attention_repeat, MT_OP_ATTENTION_BWD, {.B = 2, .T = 77, .NH = 4, .NKV = 2, .HD = 64},
     {0}, 0, 0, "the backward twice: bitwise the same where the variant asks for determinism"},
    {"attention_long", fam_attention_long, MT_OP_ATTENTION_FWD, {.B = 1, .T = 16384, .NH = 4, .NKV = 2, .HD = 16},
     {0}, 0, OC_HEAVY | OC_ACT_F32, "16k tokens with O(tile) scratch, sampled rows; timed"},
    SWI(37, 50, "odd sizes"),
    SWI(21, 300, "F % 8 != 0"),
    SWI(13, 256, "F a multiple of 8: 128-bit rows"),
    ADD(100001, "long, odd"),
    ADD(21 * 300, "a swiglu's worth"),
    ADD(13 * 256, "128-bit rows"),
    CAST(100003, "long, odd"),
    CAST(1, "one element"),
    CAST(7, "under a vector"),
    CAST(1001, "not a multiple of any vector width"),
    CAST(65537, "a unit's numel, odd"),
    CAST(21 * 300, "a swiglu's worth"),
    CAST(13 * 256, "128-bit rows"),
    XENT(37, 1000, 0, 0, 4, "one call"),
    XENT(5, 30000, 0, 80, 4, "large logits: exp would overflow without the max shift"),
    XENT(7, 5003, 0, 0, 8, "odd vocab"),
    XENT(3, 151936, 0, 0, 8, "Qwen's vocab"),
    XENT(10, 5003, 3, 0, 8, "loss-head chunks of 3 rows: losses/targets pointers offset"),
    EMB(50, 37, 300, 0, OC_W_BOTH, "repeats, C > 256"),
    EMB(50, 40, 72, 1, OC_W_BOTH, "repeats"),
    EMB(40, 33, 64, 1, OC_W_BOTH, "C = 64"),
    EMBR(7, 3000, 300, 0, "a frequent token, dwte zeroed (untied)"),
    EMBR(13, 2048, 64, 1, "a frequent token onto a tied head's gradient"),
};
const int mt_op_case_count = (int)(sizeof mt_op_cases / sizeof mt_op_cases[0]);
