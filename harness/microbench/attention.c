// attention.c: causal attention forward + backward through the backend at a model's batch:
//   attention/<backend>/<dtype>/<B>/<T>/<NH>/<NKV>   (HD 128)
// counter tflops: forward 2*B*NH*T^2*HD, backward 2.5x that (the labs' and the profile's causal
// count), per second of fwd + bwd. Why: the profile's attention tables (gpu.attention_tflops)
// were measured at B 1, NH 28 per T, and the sim prices any batch x heads at the table's rate
// for T; at T 1024 that is 178.5 TFLOP/s on the H200, where B 16 x NH 40 launches 23x the work.
// This measures the model's own launches (the 14B width at batch 16 and 64, and the table's own
// point beside them); calibrate_profile.py turns the rows into gpu.attention_work_tflops.<label>,
// the rate the sim then reads at each launch's B*NH*T^2. cuda: the cuDNN implementation (what --attention auto runs with bf16),
// CUDA-event time; cpu: a small shape, wall time (a rehearsal). Output values checked finite.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend_call.h"
#include "mb.h"

typedef struct {
    const char *backend;
    mt_dtype dt;
    mt_attn_impl impl;
} attn_cfg;

static const attn_cfg cfg_cpu = {"cpu", MT_F32, MT_ATTN_NATIVE}, cfg_cuda = {"cuda", MT_BF16, MT_ATTN_CUDNN};
enum { HD = 128 };

static float val(size_t i) { return (float)((int)((uint32_t)(i * 2654435761u) >> 28) - 8) / 16.0f; }

static void bm_attention(mt_mb_state *s, const int64_t *args, const void *user) {
    const attn_cfg *cfg = user;
    const char *why = NULL, *fail = NULL;
    mt_backend *be = mt_mb_backend(cfg->backend, cfg->dt, &why);
    if (!be) {
        mt_mb_error(s, why);
        return;
    }
    const int B = (int)args[0], T = (int)args[1], NH = (int)args[2], NKV = (int)args[3];
    const size_t es = mt_dtype_size(cfg->dt), N = (size_t)B * T;
    const size_t qkv_b = N * (NH + 2 * NKV) * HD * es, out_b = N * NH * HD * es, lse_b = N * NH * 4;
    const size_t n_check = out_b / es < ((size_t)1 << 20) ? out_b / es : ((size_t)1 << 20);
    void *h = malloc(qkv_b), *qkv = NULL, *out = NULL, *dout = NULL, *dqkv = NULL;
    float *lse = NULL;
    mt_mb_timer tm;
    fail = mt_mb_timer_init(&tm, be);
    if (fail) {
    } else if (!h) fail = "out of host memory";
    else if (mt_backend_set_attention(be, cfg->impl)) fail = mt_last_error();
    else if (mt_backend_dev_alloc(be, qkv_b, &qkv) || mt_backend_dev_alloc(be, out_b, &out) ||
             mt_backend_dev_alloc(be, out_b, &dout) || mt_backend_dev_alloc(be, qkv_b, &dqkv) ||
             mt_backend_dev_alloc(be, lse_b, (void **)&lse))
        fail = mt_last_error();
    if (!fail) {
        for (size_t i = 0; i < qkv_b / es; i++) mt_store_f32(h, cfg->dt, i, val(i));
        if (mt_backend_copy(be, qkv, h, qkv_b, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_copy(be, dout, h, out_b, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            // one untimed pass first: the cuDNN plans are built on first use
            mt_backend_attention_fwd(be, out, lse, qkv, B, T, NH, NKV, HD) ||
            mt_backend_attention_bwd(be, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HD) ||
            mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
    }
    while (!fail && mt_mb_keep_running(s)) {
        fail = mt_mb_timer_start(&tm);
        if (!fail && (mt_backend_attention_fwd(be, out, lse, qkv, B, T, NH, NKV, HD) ||
                      mt_backend_attention_bwd(be, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HD)))
            fail = mt_last_error();
        if (!fail) fail = mt_mb_timer_stop(&tm, s);
    }
    long bad = 0;
    if (!fail) {
        if (mt_backend_copy(be, h, out, n_check * es, MT_COPY_D2H, MT_STREAM_COMPUTE) ||
            mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
        for (size_t i = 0; !fail && i < n_check; i++) bad += !isfinite(mt_load_f32(h, cfg->dt, i));
    }
    if (fail) mt_mb_error(s, fail);
    else {
        double fwd = 2.0 * B * NH * (double)T * T * HD;
        mt_mb_counter(s, "tflops", fwd * 3.5 * (double)mt_mb_iterations(s) / 1e12, MT_MB_RATE);
        mt_mb_counter(s, "nonfinite", (double)bad, 0);
        mt_mb_set_label(s, cfg->impl == MT_ATTN_CUDNN ? "cudnn" : "native");
        if (bad) mt_mb_error(s, "attention: non-finite output from finite inputs");
    }
    mt_mb_timer_free(&tm);
    void *bufs[] = {qkv, out, dout, dqkv, lse};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) mt_backend_dev_free(be, bufs[i]);
    free(h);
}

void mt_mb_register_attention(void) {
    static const int64_t cpu_shape[4] = {2, 128, 4, 2};
    mt_mb_register("attention/cpu/f32", bm_attention, &cfg_cpu, cpu_shape, 4, MT_MB_REAL_TIME);
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_BF16, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "attention/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    // The table's own point (B 1, NH 28, NKV 4, T 1024); Qwen2.5-14B (40/8 heads) at batch 16 and
    // 64 x 1024 tokens, and its batch-16 tokens as one 16384-token sequence.
    static const int64_t cuda_shapes[][4] = {{1, 1024, 28, 4}, {16, 1024, 40, 8}, {64, 1024, 40, 8}, {1, 16384, 40, 8}};
    for (int i = 0; i < 4; i++)
        mt_mb_register("attention/cuda/bf16", bm_attention, &cfg_cuda, cuda_shapes[i], 4, MT_MB_MANUAL_TIME);
}
