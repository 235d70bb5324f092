// kernels.c: the memory-bound layer kernels through the backend, at a model's shapes:
//   kernel/<backend>/<dtype>/<op>/<R>/<D>
// ops: rmsnorm_fwd, add_rmsnorm_fwd, rmsnorm_bwd_add (R rows of width D = C), swiglu_fwd,
// swiglu_bwd (R tokens, D = F), rope_fwd (R tokens of D heads' q/k/v at HD 128, GQA 5:1 as
// Qwen2.5-14B's 40 + 2 x 8; in place, as the layer rotates qkv without q/k norms and as
// rope_bwd always runs: the same kernel, so its rate prices rope_bwd too), xent_fwd_bwd (R rows
// of D = V logits).
// counter sim_gbps = the bytes the sim charges the op (megatrain/backends/sim/sim_kernels.c, one
// fused pass each; repeated here as the convention of this counter) per second: divided by
// gpu.hbm_gbps it is the efficiency the sim assumes at MT_SIM_HBM_EFF (0.8) for every family,
// which no run had measured at the model's shapes (the kernel labs ran their own shapes);
// calibrate_profile.py files each as gpu.kernel_gbps.<op>, the rate the sim then prices it at.
// counter nonfinite = output values that are NaN or infinite (inputs are small and finite;
// correctness is test_backend_ops's, against double references). cpu: small shapes, f32, wall
// time (a rehearsal); cuda (when present): bf16 at Qwen2.5-14B's shapes, batch 16 x 1024.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "mb.h"

typedef enum { K_RMSNORM_FWD, K_ADD_RMSNORM_FWD, K_RMSNORM_BWD_ADD, K_SWIGLU_FWD, K_SWIGLU_BWD, K_ROPE_FWD, K_XENT } kop;
static const char *const kop_name[] = {"rmsnorm_fwd", "add_rmsnorm_fwd", "rmsnorm_bwd_add", "swiglu_fwd",
                                       "swiglu_bwd",  "rope_fwd",        "xent_fwd_bwd"};

typedef struct {
    const char *backend;
    mt_dtype dt; // activations and weights
    kop op;
} kernel_cfg;

enum { ROPE_HD = 128 };

// The sim's byte count of one call (sim_kernels.c), as = activation bytes, ws = weight bytes.
static double sim_bytes(kop op, double R, double D, double as, double ws) {
    switch (op) {
    case K_RMSNORM_FWD: return 2 * R * D * as + D * ws + 4 * R;
    case K_ADD_RMSNORM_FWD: return 4 * R * D * as + D * ws + 4 * R;
    case K_RMSNORM_BWD_ADD: return 4 * R * D * as + 2 * D * ws + 4 * R;
    case K_SWIGLU_FWD: return 3 * R * D * as;
    case K_SWIGLU_BWD: return 5 * R * D * as;
    case K_ROPE_FWD: { // D = query heads; NKV = D/5; T = R (one sequence), cos/sin tables read once
        double rows = D + 2 * (D / 5 > 0 ? D / 5 : 1);
        return 2 * R * rows * ROPE_HD * as + 2 * R * (ROPE_HD / 2) * 4.0;
    }
    case K_XENT: return 3 * R * D * as + 8 * R;
    }
    return 0;
}

static float val(size_t i) { return (float)((int)((uint32_t)(i * 2654435761u) >> 28) - 8) / 64.0f; }

static void bm_kernel(mt_mb_state *s, const int64_t *args, const void *user) {
    const kernel_cfg *cfg = user;
    const char *why = NULL, *fail = NULL;
    mt_backend *be = mt_mb_backend(cfg->backend, cfg->dt, &why);
    if (!be) {
        mt_mb_error(s, why);
        return;
    }
    const int R = (int)args[0], D = (int)args[1], NKV = D / 5 > 0 ? D / 5 : 1;
    const size_t es = mt_dtype_size(cfg->dt);
    // a: the op's main input (R x D, or R x 2D for swiglu's gate/up, or q/k/v rows for rope);
    // b: a second input (R x D); out: the output (as large as a); w: D weights; f: R floats
    size_t na = (size_t)R * D;
    if (cfg->op == K_SWIGLU_FWD || cfg->op == K_SWIGLU_BWD) na = (size_t)R * 2 * D;
    if (cfg->op == K_ROPE_FWD) na = (size_t)R * (D + 2 * NKV) * ROPE_HD;
    const size_t bytes_a = na * es;
    void *h = malloc(bytes_a), *a = NULL, *b = NULL, *out = NULL, *w = NULL, *dw = NULL;
    float *f = NULL, *cs = NULL, *sn = NULL;
    int32_t *tg = NULL;
    mt_mb_timer tm;
    fail = mt_mb_timer_init(&tm, be);
    if (fail) {
    } else if (!h) fail = "out of host memory";
    else if (mt_backend_dev_alloc(be, bytes_a, &a) || mt_backend_dev_alloc(be, bytes_a, &b) ||
             mt_backend_dev_alloc(be, bytes_a, &out) || mt_backend_dev_alloc(be, (size_t)D * 4, &w) ||
             mt_backend_dev_alloc(be, (size_t)D * 4, &dw) || mt_backend_dev_alloc(be, (size_t)R * 4, (void **)&f) ||
             mt_backend_dev_alloc(be, (size_t)R * ROPE_HD / 2 * 4, (void **)&cs) ||
             mt_backend_dev_alloc(be, (size_t)R * ROPE_HD / 2 * 4, (void **)&sn) ||
             mt_backend_dev_alloc(be, (size_t)R * 4, (void **)&tg))
        fail = mt_last_error();
    if (!fail) { // the same small values everywhere: inputs, weights, tables, (valid) targets
        for (size_t i = 0; i < na; i++) mt_store_f32(h, cfg->dt, i, val(i));
        if (mt_backend_copy(be, a, h, bytes_a, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_copy(be, b, h, bytes_a, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_copy(be, out, h, bytes_a, MT_COPY_H2D, MT_STREAM_COMPUTE) || // rmsnorm_bwd_add adds into it
            mt_backend_copy(be, w, h, (size_t)D * es, MT_COPY_H2D, MT_STREAM_COMPUTE) ||
            mt_backend_memset_zero(be, dw, (size_t)D * 4, MT_STREAM_COMPUTE) ||
            mt_backend_memset_zero(be, cs, (size_t)R * ROPE_HD / 2 * 4, MT_STREAM_COMPUTE) ||
            mt_backend_memset_zero(be, sn, (size_t)R * ROPE_HD / 2 * 4, MT_STREAM_COMPUTE) ||
            mt_backend_memset_zero(be, tg, (size_t)R * 4, MT_STREAM_COMPUTE) ||
            mt_backend_memset_zero(be, f, (size_t)R * 4, MT_STREAM_COMPUTE) || mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
    }
    int first = 1;
    while (!fail && (first || mt_mb_keep_running(s))) {
        // the first call is untimed (first-use setup is not the op's time); the loop then times
        if (!first) fail = mt_mb_timer_start(&tm);
        mt_status st = MT_OK;
        switch (cfg->op) {
        case K_RMSNORM_FWD: st = mt_backend_rmsnorm_fwd(be, out, f, a, w, cfg->dt, R, D, 1e-6f); break;
        case K_ADD_RMSNORM_FWD: st = mt_backend_add_rmsnorm_fwd(be, b, out, f, a, a, w, cfg->dt, R, D, 1e-6f); break;
        case K_RMSNORM_BWD_ADD: st = mt_backend_rmsnorm_bwd_add(be, out, dw, a, b, w, f, cfg->dt, R, D); break;
        case K_SWIGLU_FWD: st = mt_backend_swiglu_fwd(be, out, a, R, D); break;
        case K_SWIGLU_BWD: st = mt_backend_swiglu_bwd(be, out, b, a, R, D); break;
        case K_ROPE_FWD: st = mt_backend_rope_fwd(be, out, out, cs, sn, 1, R, D, NKV, ROPE_HD); break; // in place
        case K_XENT: st = mt_backend_xent_fwd_bwd(be, out, f, tg, R, D, 1.0f / R); break; // in place on out
        }
        if (!fail && st) fail = mt_last_error();
        if (!fail && first) {
            if (mt_backend_stream_sync(be, MT_STREAM_COMPUTE)) fail = mt_last_error();
            first = 0;
            continue;
        }
        if (!fail) fail = mt_mb_timer_stop(&tm, s);
    }
    long bad = 0;
    if (!fail) { // the output (for xent: the gradient written over the logits) is all finite
        size_t n_out = cfg->op == K_SWIGLU_BWD ? na : cfg->op == K_SWIGLU_FWD ? na / 2 : na;
        if (mt_backend_copy(be, h, out, n_out * es, MT_COPY_D2H, MT_STREAM_COMPUTE) ||
            mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
            fail = mt_last_error();
        for (size_t i = 0; !fail && i < n_out; i++) bad += !isfinite(mt_load_f32(h, cfg->dt, i));
    }
    if (fail) mt_mb_error(s, fail);
    else {
        double bytes = sim_bytes(cfg->op, R, D, (double)es, (double)es) * (double)mt_mb_iterations(s);
        mt_mb_counter(s, "sim_gbps", bytes / 1e9, MT_MB_RATE);
        mt_mb_counter(s, "nonfinite", (double)bad, 0);
        if (bad) mt_mb_error(s, "kernel: non-finite output from finite inputs");
    }
    mt_mb_timer_free(&tm);
    void *bufs[] = {a, b, out, w, dw, f, cs, sn, tg};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) mt_backend_dev_free(be, bufs[i]);
    free(h);
}

static void register_set(const char *backend, mt_dtype dt, const char *dname, const int64_t shapes[][2], int flags) {
    static kernel_cfg cfgs[2][7];
    const int bi = dt == MT_BF16;
    for (int op = 0; op < 7; op++) {
        cfgs[bi][op] = (kernel_cfg){backend, dt, (kop)op};
        char name[96];
        snprintf(name, sizeof name, "kernel/%s/%s/%s", backend, dname, kop_name[op]);
        mt_mb_register(name, bm_kernel, &cfgs[bi][op], shapes[op], 2, flags);
    }
}

void mt_mb_register_kernels(void) {
    // R, D per op (order of kop): norms at width 256, SwiGLU at F 704, RoPE with 4 query heads, V 4096
    static const int64_t cpu_shapes[7][2] = {{512, 256}, {512, 256}, {512, 256}, {512, 704},
                                             {512, 704}, {512, 4},   {256, 4096}};
    register_set("cpu", MT_F32, "f32", cpu_shapes, MT_MB_REAL_TIME);
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_BF16, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "kernel/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    // Qwen2.5-14B at batch 16 x 1024: C 5120 over 16384 tokens; an 8192-token MLP chunk of F
    // 13824; RoPE over 16384 tokens of 40 query heads (and 2 x 8 k/v); the loss head's 2048 rows
    // of V 152064 (a chunk; the engine picks its own).
    static const int64_t cuda_shapes[7][2] = {{16384, 5120}, {16384, 5120}, {16384, 5120}, {8192, 13824},
                                              {8192, 13824}, {16384, 40},   {2048, 152064}};
    register_set("cuda", MT_BF16, "bf16", cuda_shapes, MT_MB_MANUAL_TIME);
}
