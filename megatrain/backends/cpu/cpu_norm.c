// cpu_norm.c: RMSNorm over rows and the per-head q/k RMSNorm of Qwen3.
// Weight gradients are summed as per-block partials (double) over a row
// partition fixed by the shapes, then added in block order: reproducible for
// any thread count. In-place use (out == inp, dinp == dout) is safe.
#include <math.h>

#include "backends/cpu/cpu_internal.h"

// y(D) = x * rstd * w; returns rstd = 1/sqrt(mean(x^2) + eps).
static inline float rms_row_fwd(float *y, const float *x, const float *w, int D, float eps) {
    double ss = 0.0;
    for (int i = 0; i < D; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / D + eps));
    for (int i = 0; i < D; i++) y[i] = x[i] * r * w[i];
    return r;
}

// With y = x r w and r = (mean(x^2)+eps)^-1/2:
//   dx_k = r (w_k g_k - x_k r^2 (sum_i g_i w_i x_i) / D),  dw_k += g_k x_k r.
static inline void rms_row_bwd(float *dx, double *dw, const float *g, const float *x, const float *w, float r, int D) {
    double dot = 0.0;
    for (int i = 0; i < D; i++) dot += (double)g[i] * w[i] * x[i];
    float c = (float)(dot * r * r / D);
    for (int i = 0; i < D; i++) {
        float gi = g[i];
        dw[i] += (double)gi * x[i] * r;
        dx[i] = r * (w[i] * gi - x[i] * c);
    }
}

// out(R,D), rstd(R) from inp(R,D), w(D).
static void rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *w, int R, int D, float eps) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++)
        rstd[r] = rms_row_fwd(out + (size_t)r * D, inp + (size_t)r * D, w, D, eps);
}

// dinp(R,D) from dout, inp(R,D), w(D), rstd(R); red is (nblocks, D) doubles of
// block partials of dw.
static void rmsnorm_bwd(float *dinp, double *red, const float *dout, const float *inp, const float *w,
                        const float *rstd, int R, int D) {
    int rb = mt_cpu_block_rows(R), nb = (R + rb - 1) / rb;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        double *dw = red + (size_t)b * D;
        for (int i = 0; i < D; i++) dw[i] = 0.0;
        int r1 = (b + 1) * rb < R ? (b + 1) * rb : R;
        for (int r = b * rb; r < r1; r++) {
            size_t o = (size_t)r * D;
            rms_row_bwd(dinp + o, dw, dout + o, inp + o, w, rstd[r], D);
        }
    }
}

// dst(n) (wdt) = sum over nb blocks of red(nb, stride)[:, 0:n], in block order.
static void reduce_blocks(void *dst, mt_dtype wdt, const double *red, int nb, size_t stride, int n) {
#pragma omp parallel for schedule(static) if (n >= 4096)
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int b = 0; b < nb; b++) s += red[(size_t)b * stride + i];
        mt_store_f32(dst, wdt, i, (float)s);
    }
}

mt_status mt_cpu_op_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt,
                                int R, int D, float eps) {
    MT_TRY(mt_cpu_check_wdt(wdt, "rmsnorm_fwd"));
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cpu rmsnorm_fwd: bad shape R=%d D=%d", R, D);
    const float *wf;
    MT_TRY(mt_cpu_weights_f32(be, MT_CPU_SCR_W, w, wdt, (size_t)D, &wf));
    rmsnorm_fwd(out, rstd, inp, wf, R, D, eps);
    return MT_OK;
}

mt_status mt_cpu_op_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                                const float *rstd, mt_dtype wdt, int R, int D) {
    MT_TRY(mt_cpu_check_wdt(wdt, "rmsnorm_bwd"));
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cpu rmsnorm_bwd: bad shape R=%d D=%d", R, D);
    const float *wf;
    MT_TRY(mt_cpu_weights_f32(be, MT_CPU_SCR_W, w, wdt, (size_t)D, &wf));
    int rb = mt_cpu_block_rows(R), nb = (R + rb - 1) / rb;
    void *red;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_RED, (size_t)(nb > 0 ? nb : 1) * D * sizeof(double), &red));
    rmsnorm_bwd(dinp, red, dout, inp, wf, rstd, R, D);
    reduce_blocks(dw, wdt, red, nb, (size_t)D, D);
    return MT_OK;
}

// Residual add fused with the norm after it: sum(R,D) = a + b (sum may alias a or b),
// out = rmsnorm(sum); the same floats as mt_cpu_op_add then rmsnorm_fwd.
mt_status mt_cpu_op_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                    const void *w, mt_dtype wdt, int R, int D, float eps) {
    MT_TRY(mt_cpu_check_wdt(wdt, "add_rmsnorm_fwd"));
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cpu add_rmsnorm_fwd: bad shape R=%d D=%d", R, D);
    const float *wf;
    MT_TRY(mt_cpu_weights_f32(be, MT_CPU_SCR_W, w, wdt, (size_t)D, &wf));
    float *s = sum, *o = out;
    const float *x = a, *y = b;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        size_t off = (size_t)r * D;
        for (int i = 0; i < D; i++) s[off + i] = x[off + i] + y[off + i];
        rstd[r] = rms_row_fwd(o + off, s + off, wf, D, eps);
    }
    return MT_OK;
}

// rmsnorm_bwd adding into dacc (the residual gradient): each row's dx goes to a
// per-thread row buffer first, then dacc += it, the same floats as rmsnorm_bwd into a
// temporary then add.
mt_status mt_cpu_op_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                    const void *w, const float *rstd, mt_dtype wdt, int R, int D) {
    MT_TRY(mt_cpu_check_wdt(wdt, "rmsnorm_bwd_add"));
    if (R < 0 || D <= 0) return mt_fail(MT_ERR_SHAPE, "cpu rmsnorm_bwd_add: bad shape R=%d D=%d", R, D);
    if (dacc == dout || dacc == inp)
        return mt_fail(MT_ERR_ARG, "cpu rmsnorm_bwd_add: the accumulated gradient may not alias dout or inp");
    const float *wf;
    MT_TRY(mt_cpu_weights_f32(be, MT_CPU_SCR_W, w, wdt, (size_t)D, &wf));
    int rb = mt_cpu_block_rows(R), nb = (R + rb - 1) / rb;
    void *red, *rows;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_RED, (size_t)(nb > 0 ? nb : 1) * D * sizeof(double), &red));
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_ROWS, (size_t)(nb > 0 ? nb : 1) * D * sizeof(float), &rows));
    float *acc = dacc;
    const float *g = dout, *x = inp;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nb; blk++) {
        double *dwb = (double *)red + (size_t)blk * D;
        float *tmp = (float *)rows + (size_t)blk * D;
        for (int i = 0; i < D; i++) dwb[i] = 0.0;
        int r1 = (blk + 1) * rb < R ? (blk + 1) * rb : R;
        for (int r = blk * rb; r < r1; r++) {
            size_t o = (size_t)r * D;
            rms_row_bwd(tmp, dwb, g + o, x + o, wf, rstd[r], D);
            for (int i = 0; i < D; i++) acc[o + i] = acc[o + i] + tmp[i];
        }
    }
    reduce_blocks(dw, wdt, red, nb, (size_t)D, D);
    return MT_OK;
}

// Packed qkv rows (N, QKV*HD), QKV = NH + 2*NKV: q heads normalized with qw(HD),
// k heads with kw(HD), v heads copied; rstd(N, NH+NKV).
static void qk_norm_fwd(float *out, float *rstd, const float *inp, const float *qw, const float *kw, int N, int NH,
                        int NKV, int HD, float eps) {
    int QKV = NH + 2 * NKV, NQK = NH + NKV;
    size_t rs = (size_t)QKV * HD;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + n * rs;
        float *y = out + n * rs;
        for (int h = 0; h < NQK; h++)
            rstd[(size_t)n * NQK + h] = rms_row_fwd(y + (size_t)h * HD, x + (size_t)h * HD, h < NH ? qw : kw, HD, eps);
        if (y != x)
            for (size_t i = (size_t)NQK * HD; i < rs; i++) y[i] = x[i];
    }
}

// dinp(N, QKV*HD); red is (nblocks, 2*HD) doubles: [dqw | dkw] partials per block.
static void qk_norm_bwd(float *dinp, double *red, const float *dout, const float *inp, const float *qw, const float *kw,
                        const float *rstd, int N, int NH, int NKV, int HD) {
    int QKV = NH + 2 * NKV, NQK = NH + NKV;
    size_t rs = (size_t)QKV * HD;
    int rb = mt_cpu_block_rows(N), nb = (N + rb - 1) / rb;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        double *dqw = red + (size_t)b * 2 * HD, *dkw = dqw + HD;
        for (int i = 0; i < 2 * HD; i++) dqw[i] = 0.0;
        int n1 = (b + 1) * rb < N ? (b + 1) * rb : N;
        for (int n = b * rb; n < n1; n++) {
            for (int h = 0; h < NQK; h++) {
                size_t o = n * rs + (size_t)h * HD;
                rms_row_bwd(dinp + o, h < NH ? dqw : dkw, dout + o, inp + o, h < NH ? qw : kw,
                            rstd[(size_t)n * NQK + h], HD);
            }
            if (dinp != dout)
                for (size_t i = (size_t)NQK * HD; i < rs; i++) dinp[n * rs + i] = dout[n * rs + i];
        }
    }
}

// The q and k norm weights as f32: themselves, or widened into scratch when bf16.
static mt_status qk_weights_f32(mt_backend *be, const void *qw, const void *kw, mt_dtype wdt, int HD,
                                const float **qf, const float **kf) {
    *qf = qw, *kf = kw;
    if (wdt != MT_BF16) return MT_OK;
    void *p;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_W, 2 * (size_t)HD * sizeof(float), &p));
    mt_cpu_bf16_to_f32(p, qw, HD);
    mt_cpu_bf16_to_f32((float *)p + HD, kw, HD);
    *qf = p;
    *kf = (float *)p + HD;
    return MT_OK;
}

mt_status mt_cpu_op_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw, const void *kw,
                                mt_dtype wdt, int N, int NH, int NKV, int HD, float eps) {
    MT_TRY(mt_cpu_check_wdt(wdt, "qk_norm_fwd"));
    if (N < 0 || NH <= 0 || NKV <= 0 || HD <= 0)
        return mt_fail(MT_ERR_SHAPE, "cpu qk_norm_fwd: bad shape N=%d NH=%d NKV=%d HD=%d", N, NH, NKV, HD);
    const float *qf, *kf;
    MT_TRY(qk_weights_f32(be, qw, kw, wdt, HD, &qf, &kf));
    qk_norm_fwd(out, rstd, inp, qf, kf, N, NH, NKV, HD, eps);
    return MT_OK;
}

mt_status mt_cpu_op_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                                const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH, int NKV,
                                int HD) {
    MT_TRY(mt_cpu_check_wdt(wdt, "qk_norm_bwd"));
    if (N < 0 || NH <= 0 || NKV <= 0 || HD <= 0)
        return mt_fail(MT_ERR_SHAPE, "cpu qk_norm_bwd: bad shape N=%d NH=%d NKV=%d HD=%d", N, NH, NKV, HD);
    const float *qf, *kf;
    MT_TRY(qk_weights_f32(be, qw, kw, wdt, HD, &qf, &kf));
    int rb = mt_cpu_block_rows(N), nb = (N + rb - 1) / rb;
    void *red;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_RED, (size_t)(nb > 0 ? nb : 1) * 2 * HD * sizeof(double), &red));
    qk_norm_bwd(dinp, red, dout, inp, qf, kf, rstd, N, NH, NKV, HD);
    reduce_blocks(dqw, wdt, red, nb, 2 * (size_t)HD, HD);
    reduce_blocks(dkw, wdt, (double *)red + HD, nb, 2 * (size_t)HD, HD);
    return MT_OK;
}
