// layer.c: one transformer layer's forward and backward through the engine's
// layer template (megatrain/engine/layer.h) on a backend:
//   layer/<backend>/<act>/<fwd|bwd>/<T>/<C>/<F>
// counter tflops = the layer's GEMM FLOPs (2·T·params_per_layer forward, twice
// that backward) + causal attention (2·T²·NH·HD forward, 2.5x backward), per
// second. cpu: a small Llama layer, wall time; cuda (when present): Qwen2.5-7B's
// layer in bf16 at 4k tokens, CUDA-event time. Weights are small random values. Each
// op runs once untimed first (first-use setup is not its time).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "engine/layer.h"
#include "engine/rope_table.h"
#include "mb.h"

typedef struct {
    const char *backend;
    mt_dtype dt; // activations and weights
    int backward;
} layer_cfg;

static const layer_cfg cpu_fwd = {"cpu", MT_F32, 0}, cpu_bwd = {"cpu", MT_F32, 1},
                       cuda_fwd = {"cuda", MT_BF16, 0}, cuda_bwd = {"cuda", MT_BF16, 1};

static mt_config layer_config(int C, int F, int NH, int NKV, int HD) {
    mt_config c;
    memset(&c, 0, sizeof c);
    c.arch = MT_ARCH_QWEN2, c.vocab_size = 256, c.hidden_size = C, c.intermediate_size = F, c.num_layers = 1;
    c.num_heads = NH, c.num_kv_heads = NKV, c.head_dim = HD, c.max_position_embeddings = 1 << 20;
    c.rms_norm_eps = 1e-6f, c.rope_theta = 1e6, c.attention_bias = 1;
    return c;
}

// Uploads n host values in [-a, a) of type dt to a new device buffer.
static void *upload(mt_backend *be, mt_dtype dt, size_t n, float a, unsigned seed, const char **fail) {
    void *h = malloc(n * mt_dtype_size(dt)), *d = NULL;
    if (!h) {
        *fail = "out of host memory";
        return NULL;
    }
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        mt_store_f32(h, dt, i, a * ((float)(x >> 8) / 8388608.0f - 1.0f));
    }
    if (mt_backend_dev_alloc(be, n * mt_dtype_size(dt), &d) ||
        mt_backend_copy(be, d, h, n * mt_dtype_size(dt), MT_COPY_H2D, MT_STREAM_COMPUTE) ||
        mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
        *fail = mt_last_error();
    free(h);
    return d;
}

static void bm_layer(mt_mb_state *s, const int64_t *args, const void *user) {
    const layer_cfg *cfg = user;
    const char *why = NULL, *fail = NULL;
    mt_backend *be = mt_mb_backend(cfg->backend, cfg->dt, &why);
    if (!be) {
        mt_mb_error(s, why);
        return;
    }
    const int T = (int)args[0], C = (int)args[1], F = (int)args[2], HD = (int)args[3], NH = C / HD, NKV = NH / 4 ? NH / 4 : 1;
    mt_config c = layer_config(C, F, NH, NKV, HD);
    mt_unit_layout le, ll, lh;
    mt_layout_build(&c, &le, &ll, &lh);
    mt_dims d = {.B = 1, .T = T, .N = T, .C = C, .F = F, .NH = NH, .NKV = NKV, .HD = HD, .QKV = NH + 2 * NKV,
                 .eps = 1e-6f, .bias = 1, .mlp_rows = 8192, .wdt = cfg->dt};
    size_t rope_n = (size_t)T * HD / 2;
    float *hc = malloc(rope_n * 4), *hs = malloc(rope_n * 4);
    void *w = NULL, *g = NULL, *x = NULL, *y = NULL, *dx0 = NULL, *dx = NULL, *acts_mem = NULL, *scr_mem = NULL;
    float *cosd = NULL, *sind = NULL;
    mt_mb_timer tm;
    fail = mt_mb_timer_init(&tm, be);
    if (!fail && (!hc || !hs)) fail = "out of host memory";
    if (!fail) {
        mt_rope_tables(&c, T, hc, hs);
        w = upload(be, cfg->dt, ll.numel, 0.05f, 3, &fail);
        if (!fail) x = upload(be, cfg->dt, (size_t)T * C, 1.0f, 5, &fail);
        if (!fail) dx0 = upload(be, cfg->dt, (size_t)T * C, 0.01f, 7, &fail);
        if (!fail) cosd = upload(be, MT_F32, rope_n, 0, 0, &fail); // placeholders, overwritten below
        if (!fail) sind = upload(be, MT_F32, rope_n, 0, 0, &fail);
    }
    if (!fail && (mt_backend_copy(be, cosd, hc, rope_n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
                  mt_backend_copy(be, sind, hs, rope_n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE)))
        fail = mt_last_error();
    d.rope_cos = cosd, d.rope_sin = sind;
    size_t xb = (size_t)T * C * mt_dtype_size(cfg->dt);
    if (!fail && (mt_backend_dev_alloc(be, ll.numel * mt_dtype_size(cfg->dt), &g) || mt_backend_dev_alloc(be, xb, &y) ||
                  mt_backend_dev_alloc(be, xb, &dx) || mt_backend_dev_alloc(be, mt_layer_acts_bytes(&d, cfg->dt), &acts_mem) ||
                  mt_backend_dev_alloc(be, mt_layer_scratch_bytes(&d, cfg->dt), &scr_mem)))
        fail = mt_last_error();
    mt_layer_ptrs wv, gv;
    mt_layer_acts a;
    mt_layer_scratch sc;
    if (!fail) {
        mt_layer_bind(&ll, w, cfg->dt, &wv);
        mt_layer_bind(&ll, g, cfg->dt, &gv);
        mt_layer_acts_carve(&d, cfg->dt, acts_mem, &a);
        mt_layer_scratch_carve(&d, cfg->dt, scr_mem, &sc);
        if (mt_layer_forward(be, &d, &wv, &a, &sc, x, y)) fail = mt_last_error(); // internals for backward
    }
    // One untimed backward first: its one-time setup (the cuDNN attention plan built on first use,
    // workspace grown) is not the op's time. Without it the H200 run (part A, 2026-11-25) timed one
    // iteration of 1158 ms (the forward, warmed by the call above, 3.22 ms over 94 iterations).
    if (!fail && cfg->backward &&
        (mt_backend_copy(be, dx, dx0, xb, MT_COPY_D2D, MT_STREAM_COMPUTE) ||
         mt_layer_backward(be, &d, &wv, &gv, &a, &sc, x, dx) || mt_backend_stream_sync(be, MT_STREAM_COMPUTE)))
        fail = mt_last_error();
    const int manual = tm.manual;
    while (!fail && mt_mb_keep_running(s)) {
        if (cfg->backward) { // backward works in place on dx: restore it first, outside the timing
            if (!manual) mt_mb_pause(s);
            if (mt_backend_copy(be, dx, dx0, xb, MT_COPY_D2D, MT_STREAM_COMPUTE) || (!manual && mt_backend_stream_sync(be, MT_STREAM_COMPUTE)))
                fail = mt_last_error();
            if (!manual) mt_mb_resume(s);
        }
        if (!fail) fail = mt_mb_timer_start(&tm);
        if (!fail && (cfg->backward ? mt_layer_backward(be, &d, &wv, &gv, &a, &sc, x, dx)
                                    : mt_layer_forward(be, &d, &wv, &a, &sc, x, y)))
            fail = mt_last_error();
        if (!fail) fail = mt_mb_timer_stop(&tm, s);
    }
    if (fail) mt_mb_error(s, fail);
    else {
        double gemm = 2.0 * T * (double)mt_config_params_per_layer(&c), attn = 2.0 * T * (double)T * NH * HD;
        double flops = cfg->backward ? 2 * gemm + 2.5 * attn : gemm + attn;
        mt_mb_counter(s, "tflops", flops * (double)mt_mb_iterations(s) / 1e12, MT_MB_RATE);
    }
    mt_mb_timer_free(&tm);
    void *bufs[] = {w, g, x, y, dx0, dx, acts_mem, scr_mem, cosd, sind};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) mt_backend_dev_free(be, bufs[i]);
    free(hc), free(hs);
}

void mt_mb_register_layer(void) {
    static const int64_t cpu_shape[4] = {512, 256, 704, 64}; // T, C, F, HD
    mt_mb_register("layer/cpu/f32/fwd", bm_layer, &cpu_fwd, cpu_shape, 4, MT_MB_REAL_TIME);
    mt_mb_register("layer/cpu/f32/bwd", bm_layer, &cpu_bwd, cpu_shape, 4, MT_MB_REAL_TIME);
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_BF16, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "layer/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    static const int64_t cuda_shape[4] = {4096, 3584, 18944, 128}; // Qwen2.5-7B's layer (28/4 heads)
    mt_mb_register("layer/cuda/bf16/fwd", bm_layer, &cuda_fwd, cuda_shape, 4, MT_MB_MANUAL_TIME);
    mt_mb_register("layer/cuda/bf16/bwd", bm_layer, &cuda_bwd, cuda_shape, 4, MT_MB_MANUAL_TIME);
}
