// gemm_bwd.c: a linear layer's backward GEMMs through the backend (mt_backend_matmul_bwd),
// as the engine's layer calls them:
//   gemm_bwd/<backend>/<dtype>/<N>/<IC>/<OC>/<flags>   dinp(N,IC) = dout(N,OC) @ w(OC,IC)
//                                                       dw(OC,IC) (+)= dout^T(OC,N) @ inp(N,IC)
// flags 0: the attention projections (plain "="); flags 6 (MT_ACC_DW | MT_DW_F32): an MLP
// chunk after the first, its weight gradient summed into the f32 buffer. counter tflops =
// 4*N*IC*OC per call (both products). Why: the sim prices a backward GEMM at the efficiency
// measured for forward GEMMs (gemm/cuda/bf16) and the 14B-width rows' backward ran 14% over
// it (results/traces/gpu_c2_deepspeed-*.json, H200, 2026-11-26); this measures it, and
// calibrate_profile.py turns these rows into gpu.gemm_bwd_efficiency, which the sim prices
// matmul_bwd with. cpu: small shapes, f32, wall time (a rehearsal); cuda (when present): bf16
// at Qwen2.5-14B's layer shapes (C 5120, F 13824, NH 40, HD 128), CUDA-event time. Sampled outputs are checked
// against a host dot product ("wrong" counter).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend_call.h"
#include "mb.h"

typedef struct {
    const char *backend;
    mt_dtype dt; // activations and weights
} gemm_bwd_cfg;

static const gemm_bwd_cfg cfg_cpu = {"cpu", MT_F32}, cfg_cuda = {"cuda", MT_BF16};

// Small integers / 8: exact in bf16, and products sum exactly in f32 for these sizes.
static float val(size_t i, unsigned seed) {
    return (float)((int)((uint32_t)(i * 2654435761u + seed) >> 28) - 8) / 8.0f;
}

// 64 sampled elements of dinp and of dw against double-precision sums; dw is checked on
// the first call only (later calls with MT_ACC_DW add to it).
static long check(const void *dinp, const void *dw, mt_dtype dt, mt_dtype dwt, int N, int IC, int OC) {
    long wrong = 0;
    double tol = dt == MT_BF16 ? 1e-2 : 1e-5;
    for (int k = 0; k < 64; k++) {
        size_t n = ((size_t)k * 7919u) % (size_t)N, o = ((size_t)k * 104729u) % (size_t)OC,
               i = ((size_t)k * 15485863u) % (size_t)IC;
        double ref = 0, mag = 0;
        for (int j = 0; j < OC; j++) { // dinp[n,i] = sum_o dout[n,o] w[o,i]
            double t = (double)val(n * OC + j, 3) * val((size_t)j * IC + i, 7);
            ref += t, mag += fabs(t);
        }
        wrong += fabs(mt_load_f32(dinp, dt, n * IC + i) - ref) > tol * mag + 1e-6;
        if (!dw) continue;
        ref = 0, mag = 0;
        for (int r = 0; r < N; r++) { // dw[o,i] = sum_n dout[n,o] inp[n,i]
            double t = (double)val((size_t)r * OC + o, 3) * val((size_t)r * IC + i, 1);
            ref += t, mag += fabs(t);
        }
        wrong += fabs(mt_load_f32(dw, dwt, o * IC + i) - ref) > tol * mag + 1e-6;
    }
    return wrong;
}

static void bm_gemm_bwd(mt_mb_state *s, const int64_t *args, const void *user) {
    const gemm_bwd_cfg *cfg = user;
    const char *why = NULL;
    mt_backend *be = mt_mb_backend(cfg->backend, cfg->dt, &why);
    if (!be) {
        mt_mb_error(s, why);
        return;
    }
    const int N = (int)args[0], IC = (int)args[1], OC = (int)args[2], flags = (int)args[3];
    const mt_dtype dwt = flags & MT_DW_F32 ? MT_F32 : cfg->dt;
    const size_t es = mt_dtype_size(cfg->dt);
    const size_t in_b = (size_t)N * IC * es, w_b = (size_t)OC * IC * es, out_b = (size_t)N * OC * es,
                 dw_b = (size_t)OC * IC * mt_dtype_size(dwt);
    void *h_in = malloc(in_b), *h_w = malloc(w_b), *h_dout = malloc(out_b), *h_dinp = malloc(in_b), *h_dw = malloc(dw_b);
    void *d_in = NULL, *d_w = NULL, *d_dout = NULL, *d_dinp = NULL, *d_dw = NULL;
    mt_mb_timer tm;
    const char *fail = mt_mb_timer_init(&tm, be);
    if (fail) {
    } else if (!h_in || !h_w || !h_dout || !h_dinp || !h_dw) fail = "out of host memory";
    else if (mt_backend_dev_alloc(be, in_b, &d_in) || mt_backend_dev_alloc(be, w_b, &d_w) ||
             mt_backend_dev_alloc(be, out_b, &d_dout) || mt_backend_dev_alloc(be, in_b, &d_dinp) ||
             mt_backend_dev_alloc(be, dw_b, &d_dw))
        fail = mt_last_error();
    if (!fail) {
        for (size_t i = 0; i < (size_t)N * IC; i++) mt_store_f32(h_in, cfg->dt, i, val(i, 1));
        for (size_t i = 0; i < (size_t)OC * IC; i++) mt_store_f32(h_w, cfg->dt, i, val(i, 7));
        for (size_t i = 0; i < (size_t)N * OC; i++) mt_store_f32(h_dout, cfg->dt, i, val(i, 3));
        if (mt_backend_copy(be, d_in, h_in, in_b, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_copy(be, d_w, h_w, w_b, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_copy(be, d_dout, h_dout, out_b, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_memset_zero(be, d_dw, dw_b, MT_STREAM_COMPUTE) || mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
    }
    // One untimed call first (first-use setup is not the op's time); its dw is the one checked.
    if (!fail && (mt_backend_matmul_bwd(be, d_dinp, d_dw, NULL, d_dout, d_in, d_w, cfg->dt, N, IC, OC,
                                        flags & ~MT_ACC_DW) ||
                  mt_backend_copy(be, h_dw, d_dw, dw_b, MT_COPY_D2H, MT_STREAM_COMPUTE) ||
                  mt_backend_stream_sync(be, MT_STREAM_COMPUTE)))
        fail = mt_last_error();
    while (!fail && mt_mb_keep_running(s)) {
        fail = mt_mb_timer_start(&tm);
        if (!fail && mt_backend_matmul_bwd(be, d_dinp, d_dw, NULL, d_dout, d_in, d_w, cfg->dt, N, IC, OC, flags))
            fail = mt_last_error();
        if (!fail) fail = mt_mb_timer_stop(&tm, s);
    }
    long wrong = 0;
    if (!fail) {
        if (mt_backend_copy(be, h_dinp, d_dinp, in_b, MT_COPY_D2H, MT_STREAM_COMPUTE) ||
            mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
        else
            wrong = check(h_dinp, h_dw, cfg->dt, dwt, N, IC, OC);
    }
    if (fail) mt_mb_error(s, fail);
    else {
        double flops = 4.0 * N * IC * OC * (double)mt_mb_iterations(s);
        mt_mb_counter(s, "tflops", flops / 1e12, MT_MB_RATE);
        mt_mb_counter(s, "wrong", (double)wrong, 0);
        if (wrong) mt_mb_error(s, "gemm_bwd: sampled outputs differ from the host reference");
    }
    mt_mb_timer_free(&tm);
    void *bufs[] = {d_in, d_w, d_dout, d_dinp, d_dw};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) mt_backend_dev_free(be, bufs[i]);
    free(h_in), free(h_w), free(h_dout), free(h_dinp), free(h_dw);
}

void mt_mb_register_gemm_bwd(void) {
    static const int64_t cpu_shapes[][4] = {{256, 256, 256, 0}, {256, 256, 512, MT_ACC_DW | MT_DW_F32}};
    for (int i = 0; i < 2; i++)
        mt_mb_register("gemm_bwd/cpu/f32", bm_gemm_bwd, &cfg_cpu, cpu_shapes[i], 4, MT_MB_REAL_TIME);
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_BF16, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "gemm_bwd/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    // Qwen2.5-14B's layer at batch 16 x 1024 tokens: the attention output projection (o: C x C),
    // qkv (C -> (40 + 2*8) * 128), and an 8k-token MLP chunk's down (F -> C) and gate/up (C -> 2F),
    // each MLP one as a later chunk (f32 sum); the forward benchmark's 7B shape beside them.
    static const int64_t cuda_shapes[][4] = {{16384, 5120, 5120, 0},
                                             {16384, 5120, 7168, 0},
                                             {8192, 13824, 5120, MT_ACC_DW | MT_DW_F32},
                                             {8192, 5120, 27648, MT_ACC_DW | MT_DW_F32},
                                             {8192, 3584, 18944, 0}};
    for (int i = 0; i < 5; i++)
        mt_mb_register("gemm_bwd/cuda/bf16", bm_gemm_bwd, &cfg_cuda, cuda_shapes[i], 4, MT_MB_MANUAL_TIME);
}
