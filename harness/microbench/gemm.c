// gemm.c: GEMM rate through the backend interface (mt_backend_matmul_fwd):
//   gemm/<backend>/<dtype>/<N>/<IC>/<OC>   out(N,OC) = inp(N,IC) @ w(OC,IC)^T
// counter tflops = 2*N*IC*OC per call (decimal TFLOP/s). cpu: small shapes, f32,
// wall time. cuda (when present): bf16 and exact fp32, CUDA-event time.
// A sample of outputs is checked against a host dot product ("wrong" counter).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "mb.h"

typedef struct {
    const char *backend;
    mt_dtype dt; // activations and weights
} gemm_cfg;

static const gemm_cfg cfg_cpu_f32 = {"cpu", MT_F32}, cfg_cuda_bf16 = {"cuda", MT_BF16}, cfg_cuda_f32 = {"cuda", MT_F32};

// Small integers / 8: exact in bf16, and products sum exactly in f32 for these sizes.
static float val(size_t i, unsigned seed) {
    return (float)((int)((uint32_t)(i * 2654435761u + seed) >> 28) - 8) / 8.0f;
}

static void bm_gemm(mt_mb_state *s, const int64_t *args, const void *user) {
    const gemm_cfg *cfg = user;
    const char *why = NULL;
    mt_backend *be = mt_mb_backend(cfg->backend, cfg->dt, &why);
    if (!be) {
        mt_mb_error(s, why);
        return;
    }
    const int N = (int)args[0], IC = (int)args[1], OC = (int)args[2];
    const size_t es = mt_dtype_size(cfg->dt);
    const size_t in_b = (size_t)N * IC * es, w_b = (size_t)OC * IC * es, out_b = (size_t)N * OC * es;
    void *h_in = malloc(in_b), *h_w = malloc(w_b), *h_out = malloc(out_b);
    void *d_in = NULL, *d_w = NULL, *d_out = NULL;
    mt_mb_timer tm;
    const char *fail = mt_mb_timer_init(&tm, be);
    if (fail) {
    } else if (!h_in || !h_w || !h_out) fail = "out of host memory";
    else if (mt_backend_dev_alloc(be, in_b, &d_in) || mt_backend_dev_alloc(be, w_b, &d_w) || mt_backend_dev_alloc(be, out_b, &d_out))
        fail = mt_last_error();
    if (!fail) {
        for (size_t i = 0; i < (size_t)N * IC; i++) mt_store_f32(h_in, cfg->dt, i, val(i, 1));
        for (size_t i = 0; i < (size_t)OC * IC; i++) mt_store_f32(h_w, cfg->dt, i, val(i, 7));
        if (mt_backend_copy(be, d_in, h_in, in_b, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_copy(be, d_w, h_w, w_b, MT_COPY_H2D, MT_STREAM_COMPUTE) || mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
    }
    while (!fail && mt_mb_keep_running(s)) {
        fail = mt_mb_timer_start(&tm);
        if (!fail && mt_backend_matmul_fwd(be, d_out, d_in, d_w, NULL, cfg->dt, N, IC, OC)) fail = mt_last_error();
        if (!fail) fail = mt_mb_timer_stop(&tm, s);
    }
    long wrong = 0;
    if (!fail) {
        if (mt_backend_copy(be, h_out, d_out, out_b, MT_COPY_D2H, MT_STREAM_COMPUTE) || mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
        double tol = cfg->dt == MT_BF16 ? 1e-2 : 1e-5;
        for (int k = 0; !fail && k < 64; k++) { // 64 sampled outputs
            size_t n = ((size_t)k * 7919u) % (size_t)N, o = ((size_t)k * 104729u) % (size_t)OC;
            double ref = 0, mag = 0;
            for (int i = 0; i < IC; i++) {
                double t = (double)val(n * IC + i, 1) * val(o * IC + i, 7);
                ref += t, mag += fabs(t);
            }
            double got = mt_load_f32(h_out, cfg->dt, n * OC + o);
            wrong += fabs(got - ref) > tol * mag + 1e-6;
        }
    }
    if (fail) mt_mb_error(s, fail);
    else {
        double flops = 2.0 * N * IC * OC * (double)mt_mb_iterations(s);
        mt_mb_counter(s, "tflops", flops / 1e12, MT_MB_RATE);
        mt_mb_counter(s, "wrong", (double)wrong, 0);
        if (wrong) mt_mb_error(s, "gemm: sampled outputs differ from the host reference");
    }
    mt_mb_timer_free(&tm);
    if (d_in) mt_backend_dev_free(be, d_in);
    if (d_w) mt_backend_dev_free(be, d_w);
    if (d_out) mt_backend_dev_free(be, d_out);
    free(h_in), free(h_w), free(h_out);
}

void mt_mb_register_gemm(void) {
    static const int64_t cpu_shapes[][3] = {{256, 256, 256}, {512, 1024, 1024}, {1024, 896, 4864}};
    for (int i = 0; i < 3; i++)
        mt_mb_register("gemm/cpu/f32", bm_gemm, &cfg_cpu_f32, cpu_shapes[i], 3, MT_MB_REAL_TIME);
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_BF16, &why) || !mt_mb_backend("cuda", MT_F32, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "gemm/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    // A square GEMM and Qwen2.5-7B's MLP up/down projections at 8k tokens.
    static const int64_t cuda_shapes[][3] = {{4096, 4096, 4096}, {8192, 3584, 18944}, {8192, 18944, 3584}};
    for (int i = 0; i < 3; i++)
        mt_mb_register("gemm/cuda/bf16", bm_gemm, &cfg_cuda_bf16, cuda_shapes[i], 3, MT_MB_MANUAL_TIME);
    mt_mb_register("gemm/cuda/f32", bm_gemm, &cfg_cuda_f32, cuda_shapes[0], 3, MT_MB_MANUAL_TIME);
}
