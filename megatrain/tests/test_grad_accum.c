// test_grad_accum.c: a weight gradient computed in token chunks, summed in f32
// (matmul_bwd with MT_DW_F32, one cast to bf16 at the end) against the same sum
// kept in bf16 (each chunk's "+=" rounds), both against a float64 reference, on
// a chunked LM head: per chunk, logits = xn W^T, d(logits) = softmax - onehot
// (scaled by 1/N), dW += d(logits)^T xn, as engine/head.c runs it.
//   error(x) = ||x - dW64|| / ||dW64||   over the V x C gradient
// The f32 sum must be nearer the reference than the bf16 one, and within twice
// the error of one rounding of the reference itself to bf16 (what an exact sum
// rounded once would show). Runs on the cpu backend (f32 activations) and, where
// a GPU is present, on cuda (bf16 activations, cuBLASLt accumulating bf16 A/B
// into an f32 C); the cuda part reports "skipped" without one.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "test_util.h"
#include "backend/backend_registry.h"
#include "backends/cuda/cuda.h"

enum { N = 4096, C = 64, V = 512, CHUNK = 32 }; // 128 chunks, as the head at batch x seq >> chunk

static double rel_err(const uint16_t *x, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = mt_bf16_to_f32(x[i]) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

// The f64 gradient of mean cross-entropy over N rows w.r.t. W, from the same inputs.
static void reference(const float *xn, const float *W, const int32_t *tgt, double *dW) {
    double *p = malloc(sizeof(double) * V);
    memset(dW, 0, sizeof(double) * V * C);
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) {
            double z = 0;
            for (int c = 0; c < C; c++) z += (double)xn[(size_t)n * C + c] * W[(size_t)v * C + c];
            p[v] = z;
            mx = z > mx ? z : mx;
        }
        for (int v = 0; v < V; v++) sum += (p[v] = exp(p[v] - mx));
        for (int v = 0; v < V; v++) {
            double g = (p[v] / sum - (v == tgt[n])) / N;
            for (int c = 0; c < C; c++) dW[(size_t)v * C + c] += g * xn[(size_t)n * C + c];
        }
    }
    free(p);
}

static mt_status dev_put(mt_backend *be, void **d, const void *h, size_t bytes) {
    MT_TRY(mt_backend_dev_alloc(be, bytes, d));
    return mt_backend_copy(be, *d, h, bytes, MT_COPY_H2D, MT_STREAM_COMPUTE);
}

// The chunked head on backend be; out_bf16 / out_f32 receive dW summed in bf16 and
// summed in f32 then rounded once.
static mt_status chunked_head(mt_backend *be, const float *xn, const uint16_t *Wb, const int32_t *tgt,
                              uint16_t *out_bf16, uint16_t *out_f32) {
    mt_dtype act = be->act_dtype;
    size_t as = mt_dtype_size(act), nw = (size_t)V * C;
    void *h_x = malloc((size_t)N * C * as);
    if (!h_x) return mt_fail(MT_ERR_MEMORY, "out of memory");
    mt_convert(h_x, act, xn, MT_F32, (size_t)N * C);
    void *d_x = NULL, *d_w = NULL, *d_t = NULL, *d_logits = NULL, *d_loss = NULL, *d_gb = NULL, *d_gf = NULL,
         *d_once = NULL;
    mt_status s = dev_put(be, &d_x, h_x, (size_t)N * C * as);
    if (s == MT_OK) s = dev_put(be, &d_w, Wb, nw * 2);
    if (s == MT_OK) s = dev_put(be, &d_t, tgt, (size_t)N * 4);
    if (s == MT_OK) s = mt_backend_dev_alloc(be, (size_t)CHUNK * V * as, &d_logits);
    if (s == MT_OK) s = mt_backend_dev_alloc(be, (size_t)N * 4, &d_loss);
    if (s == MT_OK) s = mt_backend_dev_alloc(be, nw * 2, &d_gb);
    if (s == MT_OK) s = mt_backend_dev_alloc(be, nw * 4, &d_gf);
    if (s == MT_OK) s = mt_backend_dev_alloc(be, nw * 2, &d_once);
    for (int pass = 0; pass < 2 && s == MT_OK; pass++) { // 0: bf16 sum, 1: f32 sum
        for (int r0 = 0; r0 < N && s == MT_OK; r0 += CHUNK) {
            const char *x = (const char *)d_x + (size_t)r0 * C * as;
            int acc = r0 > 0 ? MT_ACC_DW : 0;
            s = mt_backend_matmul_fwd(be, d_logits, x, d_w, NULL, MT_BF16, CHUNK, C, V);
            if (s == MT_OK)
                s = mt_backend_xent_fwd_bwd(be, d_logits, (float *)d_loss + r0, (const int32_t *)d_t + r0, CHUNK, V, 1.0f / N);
            if (s == MT_OK)
                s = mt_backend_matmul_bwd(be, NULL, pass ? d_gf : d_gb, NULL, d_logits, x, d_w, MT_BF16, CHUNK, C, V,
                                  acc | (pass ? MT_DW_F32 : 0));
        }
    }
    if (s == MT_OK) s = mt_backend_cast(be, d_once, MT_BF16, d_gf, MT_F32, nw); // the one rounding
    if (s == MT_OK) s = mt_backend_copy(be, out_bf16, d_gb, nw * 2, MT_COPY_D2H, MT_STREAM_COMPUTE);
    if (s == MT_OK) s = mt_backend_copy(be, out_f32, d_once, nw * 2, MT_COPY_D2H, MT_STREAM_COMPUTE);
    if (s == MT_OK) s = mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    void *all[] = {d_x, d_w, d_t, d_logits, d_loss, d_gb, d_gf, d_once};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]) mt_backend_dev_free(be, all[i]);
    free(h_x);
    return s;
}

static void run_on(mt_backend *be, const char *name, const float *xn, const uint16_t *Wb, const int32_t *tgt,
                   const double *ref) {
    size_t nw = (size_t)V * C;
    uint16_t *gb = malloc(nw * 2), *gf = malloc(nw * 2), *once = malloc(nw * 2);
    mt_status s = chunked_head(be, xn, Wb, tgt, gb, gf);
    CHECK(s == MT_OK, "%s: chunked head: %s", name, mt_last_error());
    if (s == MT_OK) {
        for (size_t i = 0; i < nw; i++) once[i] = mt_f32_to_bf16((float)ref[i]);
        double e_bf16 = rel_err(gb, ref, nw), e_f32 = rel_err(gf, ref, nw), e_round = rel_err(once, ref, nw);
        printf("{\"test\":\"grad_accum\",\"backend\":\"%s\",\"chunks\":%d,\"rel_err_bf16_sum\":%.3e,"
               "\"rel_err_f32_sum\":%.3e,\"rel_err_one_rounding\":%.3e}\n",
               name, N / CHUNK, e_bf16, e_f32, e_round);
        CHECK(e_f32 < e_bf16, "%s: f32 sum (%.3e) nearer the f64 reference than the bf16 sum (%.3e)", name, e_f32,
              e_bf16);
        CHECK(e_f32 <= 2 * e_round, "%s: f32 sum error %.3e within 2x one bf16 rounding (%.3e)", name, e_f32, e_round);
    }
    free(gb);
    free(gf);
    free(once);
}

int main(void) {
    float *xn = malloc(sizeof(float) * N * C), *W = malloc(sizeof(float) * V * C);
    uint16_t *Wb = malloc(2 * (size_t)V * C);
    int32_t *tgt = malloc(sizeof(int32_t) * N);
    double *ref = malloc(sizeof(double) * V * C);
    mt_test_fill_uniform(xn, (size_t)N * C, 11, -2.0f, 2.0f);
    mt_test_fill_uniform(W, (size_t)V * C, 12, -0.2f, 0.2f);
    for (size_t i = 0; i < (size_t)V * C; i++) W[i] = mt_bf16_to_f32(Wb[i] = mt_f32_to_bf16(W[i]));
    for (size_t i = 0; i < (size_t)N * C; i++) xn[i] = mt_bf16_to_f32(mt_f32_to_bf16(xn[i])); // exact in both act types
    unsigned long long r = 7;
    for (int n = 0; n < N; n++) tgt[n] = (int32_t)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 33) % V;
    reference(xn, W, tgt, ref);

    mt_backend *cpu = NULL;
    if (mt_backend_create("cpu", MT_F32, &cpu) == MT_OK) {
        run_on(cpu, "cpu", xn, Wb, tgt, ref);
        mt_backend_destroy(cpu);
    } else {
        CHECK(0, "cpu backend: %s", mt_last_error());
    }
#ifdef MT_HAVE_CUDA
    mt_backend *gpu = NULL;
    if (mt_backend_cuda_available() && mt_backend_create("cuda", MT_BF16, &gpu) == MT_OK) {
        run_on(gpu, "cuda", xn, Wb, tgt, ref);
        mt_backend_destroy(gpu);
    } else {
        fprintf(stderr, "test_grad_accum: cuda part skipped (no GPU)\n");
    }
#endif
    free(xn);
    free(W);
    free(Wb);
    free(tgt);
    free(ref);
    return mt_test_finish("test_grad_accum");
}
