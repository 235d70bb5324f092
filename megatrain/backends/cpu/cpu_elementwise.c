// cpu_elementwise.c: SwiGLU, residual add, dtype cast and the token embedding.
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_internal.h"

// h(N,F) = silu(gate) * up, gu rows (N, 2F) = [gate | up].
static void swiglu_fwd(float *h, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *o = h + (size_t)n * F;
        for (int i = 0; i < F; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

// dgu(N,2F) from dh(N,F), gu(N,2F):  d gate = dh u sig (1 + g (1 - sig)),  d up = dh silu(g).
static void swiglu_bwd(float *dgu, const float *dh, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *d = dh + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            float sig = 1.0f / (1.0f + expf(-g[i])), gi = g[i], ui = u[i], di = d[i];
            dg[i] = di * ui * sig * (1.0f + gi * (1.0f - sig));
            du[i] = di * gi * sig;
        }
    }
}

mt_status mt_cpu_op_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F) {
    (void)be;
    if (N < 0 || F <= 0) return mt_fail(MT_ERR_SHAPE, "cpu swiglu_fwd: bad shape N=%d F=%d", N, F);
    swiglu_fwd(h, gu, N, F);
    return MT_OK;
}

mt_status mt_cpu_op_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F) {
    (void)be;
    if (N < 0 || F <= 0) return mt_fail(MT_ERR_SHAPE, "cpu swiglu_bwd: bad shape N=%d F=%d", N, F);
    swiglu_bwd(dgu, dh, gu, N, F);
    return MT_OK;
}

// out(n) = a(n) + b(n); out may alias a or b.
mt_status mt_cpu_op_add(mt_backend *be, void *out, const void *a, const void *b, size_t n) {
    (void)be;
    float *o = out;
    const float *x = a, *y = b;
#pragma omp parallel for schedule(static) if (n > (1u << 15))
    for (size_t i = 0; i < n; i++) o[i] = x[i] + y[i];
    return MT_OK;
}

mt_status mt_cpu_op_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    (void)be;
    MT_TRY(mt_cpu_check_wdt(dt, "cast"));
    MT_TRY(mt_cpu_check_wdt(st, "cast"));
    // Chunks of 64k elements, each converted by mt_convert (memmove for equal
    // types, so an in-place same-type cast is a no-op).
    size_t chunk = (size_t)1 << 16, nchunks = (n + chunk - 1) / chunk;
    size_t es = mt_dtype_size(dt), ss = mt_dtype_size(st);
    if (dt != st && dst == src && es > ss)
        return mt_fail(MT_ERR_ARG, "cpu cast: in-place widening %s -> %s is not supported", mt_dtype_name(st),
                       mt_dtype_name(dt));
    if (dt != st && dst == src) { // narrowing in place: chunks must run in order
        mt_convert(dst, dt, src, st, n);
        return MT_OK;
    }
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t i0 = c * chunk, m = n - i0 < chunk ? n - i0 : chunk;
        mt_convert((char *)dst + i0 * es, dt, (const char *)src + i0 * ss, st, m);
    }
    return MT_OK;
}

// out(N,C) = wte(V,C)[ids[n], :] (wte f32 or bf16).
mt_status mt_cpu_op_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N,
                                  int C) {
    (void)be;
    MT_TRY(mt_cpu_check_wdt(wdt, "embedding_fwd"));
    if (N < 0 || C <= 0) return mt_fail(MT_ERR_SHAPE, "cpu embedding_fwd: bad shape N=%d C=%d", N, C);
    for (int n = 0; n < N; n++)
        if (ids[n] < 0) return mt_fail(MT_ERR_ARG, "cpu embedding_fwd: negative token id %d at %d", ids[n], n);
    float *o = out;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        size_t row = (size_t)ids[n] * C;
        if (wdt == MT_F32) {
            const float *w = (const float *)wte + row;
            for (int c = 0; c < C; c++) o[(size_t)n * C + c] = w[c];
        } else {
            const uint16_t *w = (const uint16_t *)wte + row;
            for (int c = 0; c < C; c++) o[(size_t)n * C + c] = mt_bf16_to_f32(w[c]);
        }
    }
    return MT_OK;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

// dwte(V,C) += scatter of dout(N,C) by ids. Tokens are sorted by (id, position)
// so that each row is owned by one thread, summed in f32 in token order starting
// from its current value, and (bf16) rounded once.
mt_status mt_cpu_op_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout, int N,
                                  int C) {
    MT_TRY(mt_cpu_check_wdt(wdt, "embedding_bwd"));
    if (N < 0 || C <= 0) return mt_fail(MT_ERR_SHAPE, "cpu embedding_bwd: bad shape N=%d C=%d", N, C);
    if (N == 0) return MT_OK;
    void *p;
    // keys (N) then the start index of each run of equal ids (N+1)
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_IDX, (size_t)N * sizeof(uint64_t) + (size_t)(N + 1) * sizeof(int), &p));
    uint64_t *key = p;
    int *start = (int *)(key + N);
    for (int n = 0; n < N; n++) {
        if (ids[n] < 0) return mt_fail(MT_ERR_ARG, "cpu embedding_bwd: negative token id %d at %d", ids[n], n);
        key[n] = ((uint64_t)(uint32_t)ids[n] << 32) | (uint32_t)n;
    }
    qsort(key, (size_t)N, sizeof *key, cmp_u64);
    int nruns = 0;
    for (int n = 0; n < N; n++)
        if (n == 0 || (key[n] >> 32) != (key[n - 1] >> 32)) start[nruns++] = n;
    start[nruns] = N;
    const float *d = dout;
#pragma omp parallel for schedule(dynamic, 16)
    for (int r = 0; r < nruns; r++) {
        size_t row = (size_t)(key[start[r]] >> 32) * C;
        for (int c0 = 0; c0 < C; c0 += 256) {
            int c1 = c0 + 256 < C ? c0 + 256 : C;
            float acc[256];
            for (int c = c0; c < c1; c++) acc[c - c0] = mt_load_f32(dwte, wdt, row + c);
            for (int k = start[r]; k < start[r + 1]; k++) {
                const float *g = d + (size_t)(uint32_t)key[k] * C;
                for (int c = c0; c < c1; c++) acc[c - c0] += g[c];
            }
            for (int c = c0; c < c1; c++) mt_store_f32(dwte, wdt, row + c, acc[c - c0]);
        }
    }
    return MT_OK;
}
