// cpu_matmul.c: linear layers on OpenBLAS sgemm. bf16 weights are widened to
// f32 scratch first and bf16 weight gradients are formed in f32 and rounded
// once, so a bf16 run equals the f32 run on bf16-rounded weights. With
// MT_DW_F32 the weight gradient stays in the caller's f32 buffer (sgemm with
// beta 1 sums chunks in f32), for the caller to round once.
#include <cblas.h>

#include "backends/cpu/cpu_internal.h"

// out(N,OC) = inp(N,IC) @ w(OC,IC)^T + bias(OC); bias may be NULL.
static void matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N, int IC, int OC) {
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] = bias[o];
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, inp, IC, w, IC, beta, out, OC);
}

// dbias(OC) (+)= sum over n of dout(N,OC). Each 64-column chunk belongs to one
// thread and sums rows in order (in double), so the result ignores thread count.
static void dbias_pass(void *dbias, mt_dtype wdt, const float *dout, int N, int OC, int acc) {
    int nchunks = (OC + 63) / 64;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int o0 = ch * 64, o1 = o0 + 64 < OC ? o0 + 64 : OC;
        double s[64] = {0};
        for (int n = 0; n < N; n++) {
            const float *row = dout + (size_t)n * OC;
            for (int o = o0; o < o1; o++) s[o - o0] += row[o];
        }
        for (int o = o0; o < o1; o++) {
            float v = (float)s[o - o0];
            if (acc) v += mt_load_f32(dbias, wdt, o);
            mt_store_f32(dbias, wdt, o, v);
        }
    }
}

// Rows o0..o0+m of a bf16 weight gradient: formed (or, acc, summed onto its value) in f32 in
// dwf (m x IC), then rounded once. dout points at column o0 of dout(N,OC).
static void dw_f32(float *dwf, uint16_t *dw, const float *dout, const float *inp, int N, int IC, int OC, int m,
                   int acc) {
    size_t n = (size_t)m * IC;
    if (acc) mt_cpu_bf16_to_f32(dwf, dw, n);
    if (N > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, IC, N, 1.0f, dout, OC, inp, IC, acc ? 1.0f : 0.0f,
                    dwf, IC);
    else if (!acc)
        for (size_t i = 0; i < n; i++) dwf[i] = 0.0f;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dw[i] = mt_f32_to_bf16(dwf[i]);
}

mt_status mt_cpu_op_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias,
                               mt_dtype wdt, int N, int IC, int OC) {
    MT_TRY(mt_cpu_check_wdt(wdt, "matmul_fwd"));
    if (N < 0 || IC <= 0 || OC <= 0)
        return mt_fail(MT_ERR_SHAPE, "cpu matmul_fwd: bad shape N=%d IC=%d OC=%d", N, IC, OC);
    if (N == 0) return MT_OK;
    const float *wf, *bf = NULL;
    MT_TRY(mt_cpu_weights_f32(be, MT_CPU_SCR_W, w, wdt, (size_t)OC * IC, &wf));
    if (bias) MT_TRY(mt_cpu_weights_f32(be, MT_CPU_SCR_DW, bias, wdt, (size_t)OC, &bf));
    matmul_fwd(out, inp, wf, bf, N, IC, OC);
    return MT_OK;
}

mt_status mt_cpu_op_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                               const void *w, mt_dtype wdt, int N, int IC, int OC, int flags) {
    MT_TRY(mt_cpu_check_wdt(wdt, "matmul_bwd"));
    if (N < 0 || IC <= 0 || OC <= 0)
        return mt_fail(MT_ERR_SHAPE, "cpu matmul_bwd: bad shape N=%d IC=%d OC=%d", N, IC, OC);
    int acc_dw = (flags & MT_ACC_DW) != 0;
    mt_dtype dwt = (flags & MT_DW_F32) ? MT_F32 : wdt; // the type of dw and dbias
    if (dinp && N > 0) {
        const float *wf;
        MT_TRY(mt_cpu_weights_f32(be, MT_CPU_SCR_W, w, wdt, (size_t)OC * IC, &wf));
        // dinp(N,IC) = dout(N,OC) @ w(OC,IC)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, dout, OC, wf, IC,
                    (flags & MT_ACC_DINP) ? 1.0f : 0.0f, dinp, IC);
    }
    if (dw && dwt == MT_BF16) {
        // In blocks of rows: each element's sum over N is the same at any row count, so the f32
        // scratch is one block's, not the whole matrix's (the head's V x C: 1.2 GB at Qwen2.5-3B).
        int rows = MT_CPU_DW_BLOCK_FLOATS / IC < 1 ? 1 : (int)(MT_CPU_DW_BLOCK_FLOATS / IC);
        if (rows > OC) rows = OC;
        void *p;
        MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_DW, (size_t)rows * IC * sizeof(float), &p));
        for (int o0 = 0; o0 < OC; o0 += rows) {
            int m = OC - o0 < rows ? OC - o0 : rows;
            dw_f32(p, (uint16_t *)dw + (size_t)o0 * IC, (const float *)dout + o0, inp, N, IC, OC, m, acc_dw);
        }
    } else if (dw) {
        // dw(OC,IC) = dout(N,OC)^T @ inp(N,IC)
        float *dwf = dw;
        if (N > 0)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC,
                        acc_dw ? 1.0f : 0.0f, dwf, IC);
        else if (!acc_dw)
            for (size_t i = 0; i < (size_t)OC * IC; i++) dwf[i] = 0.0f;
    }
    if (dbias) dbias_pass(dbias, dwt, dout, N, OC, acc_dw);
    return MT_OK;
}
