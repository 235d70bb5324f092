// test_cuda_ops.c: every CUDA backend op against the cpu backend (the oracle) by
// normalized MSE, with f32 and bf16 activations and f32/bf16 weights, on shapes that
// take both the 128-bit and the scalar instantiation of each kernel. Inputs are
// rounded to the GPU dtype first, so both sides see identical values and only
// compute/rounding differs. Both attention implementations: the native kernels and
// cuDNN's fused flash attention (causal GQA/MHA, head dims 64 and 128, odd lengths).
// Exit 77 (skipped) without CUDA or a device.
// Usage: test_cuda_ops [--no-deliberate-errors]   (the flag leaves out the checks that
// provoke CUDA API errors on purpose, e.g. a 1 PiB cudaMalloc, so that
// compute-sanitizer's report holds only real errors; ci/gpu_campaign.sh runs it so there, part G.)
// Env: MT_TEST_VERBOSE=1 prints every comparison; MT_REQUIRE_CUDNN=1 fails (instead of
// skipping the cuDNN part) when libcudnn does not load.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "test_util.h"

#ifndef MT_HAVE_CUDA
int main(void) {
    fprintf(stderr, "test_cuda_ops: skipped (built without CUDA)\n");
    return 77;
}
#else

static mt_backend *cpu, *gpu;
static int verbose;
static unsigned long long seed_ctr = 1;

// A tensor on both sides: h = f32 host copy (what the cpu backend reads and
// writes), d = device copy in dtype t (what the cuda backend reads and writes).
typedef struct {
    float *h;
    void *d;
    size_t n;
    mt_dtype t;
} tp;

static float *host_f32(size_t n) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes);
    if (!p) {
        fprintf(stderr, "test_cuda_ops: out of host memory\n");
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

static void die_on(mt_status s, const char *what) {
    if (s != MT_OK) {
        fprintf(stderr, "test_cuda_ops: %s failed: %s: %s\n", what, mt_status_name(s), mt_last_error());
        exit(1);
    }
}

static void round_to(float *x, size_t n, mt_dtype t) {
    if (t == MT_BF16)
        for (size_t i = 0; i < n; i++) x[i] = mt_bf16_to_f32(mt_f32_to_bf16(x[i]));
}

static void upload(tp *x) {
    size_t bytes = x->n * mt_dtype_size(x->t);
    void *tmp = malloc(bytes ? bytes : 1);
    mt_convert(tmp, x->t, x->h, MT_F32, x->n);
    die_on(gpu->ops->copy(gpu, x->d, tmp, bytes, MT_COPY_H2D, MT_STREAM_COMPUTE), "copy h2d");
    die_on(gpu->ops->stream_sync(gpu, MT_STREAM_COMPUTE), "sync");
    free(tmp);
}

static tp tp_new(size_t n, mt_dtype t, float lo, float hi) {
    tp x = {host_f32(n), NULL, n, t};
    mt_test_fill_uniform(x.h, n, seed_ctr++, lo, hi);
    round_to(x.h, n, t);
    die_on(gpu->ops->dev_alloc(gpu, (n ? n : 1) * mt_dtype_size(t), &x.d), "dev_alloc");
    upload(&x);
    return x;
}
static tp tp_rand(size_t n, mt_dtype t) { return tp_new(n, t, -1.f, 1.f); }

static void tp_free(tp *x) {
    free(x->h);
    gpu->ops->dev_free(gpu, x->d);
    x->h = NULL;
    x->d = NULL;
}

static float *download(const tp *x) {
    size_t bytes = x->n * mt_dtype_size(x->t);
    void *tmp = malloc(bytes ? bytes : 1);
    float *out = host_f32(x->n);
    die_on(gpu->ops->stream_sync(gpu, MT_STREAM_COMPUTE), "sync before d2h");
    die_on(gpu->ops->copy(gpu, tmp, x->d, bytes, MT_COPY_D2H, MT_STREAM_COMPUTE), "copy d2h");
    die_on(gpu->ops->stream_sync(gpu, MT_STREAM_COMPUTE), "sync");
    mt_convert(out, MT_F32, tmp, x->t, x->n);
    free(tmp);
    return out;
}

// Device pointer `elems` elements into x (row-offset views, as the engine makes them).
static void *dev_at(const tp *x, size_t elems) { return (char *)x->d + elems * mt_dtype_size(x->t); }

// Compares the GPU result in x.d with the CPU result in x.h.
static void cmp(const char *what, const char *cfg, const tp *x, double tol) {
    float *g = download(x);
    double e = mt_test_nmse(g, x->h, x->n);
    int finite = 1;
    for (size_t i = 0; i < x->n; i++)
        if (!isfinite(g[i])) finite = 0;
    if (verbose) fprintf(stderr, "  %-28s %-26s nmse %.3e (tol %.0e)\n", what, cfg, e, tol);
    CHECK(finite && e <= tol, "%s [%s]: nmse %.3e > %.1e%s. HINT: rerun with MT_TEST_VERBOSE=1 / compute-sanitizer",
          what, cfg, e, tol, finite ? "" : " (non-finite values)");
    free(g);
}

static void *dev_i32(const int32_t *h, size_t n) {
    void *d = NULL;
    die_on(gpu->ops->dev_alloc(gpu, n * 4, &d), "dev_alloc ids");
    die_on(gpu->ops->copy(gpu, d, h, n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE), "copy ids");
    die_on(gpu->ops->stream_sync(gpu, MT_STREAM_COMPUTE), "sync");
    return d;
}

#define RUN2(call_cpu, call_gpu)                    \
    do {                                            \
        die_on((call_cpu), "cpu " #call_cpu);       \
        die_on((call_gpu), "cuda " #call_gpu);      \
    } while (0)

static double tol_for(mt_dtype act, double f32_tol, double bf16_tol) { return act == MT_F32 ? f32_tol : bf16_tol; }

// ---- ops ----
static void test_matmul(mt_dtype act, mt_dtype wdt, int N, int IC, int OC) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s w=%s %dx%dx%d", mt_dtype_name(act), mt_dtype_name(wdt), N, IC, OC);
    tp inp = tp_rand((size_t)N * IC, act), w = tp_rand((size_t)OC * IC, wdt), b = tp_rand(OC, wdt);
    tp out = tp_rand((size_t)N * OC, act), out_nb = tp_rand((size_t)N * OC, act);
    RUN2(cpu->ops->matmul_fwd(cpu, out.h, inp.h, w.h, b.h, MT_F32, N, IC, OC),
         gpu->ops->matmul_fwd(gpu, out.d, inp.d, w.d, b.d, wdt, N, IC, OC));
    cmp("matmul_fwd (bias)", cfg, &out, tol_for(act, 1e-10, 1e-4));
    RUN2(cpu->ops->matmul_fwd(cpu, out_nb.h, inp.h, w.h, NULL, MT_F32, N, IC, OC),
         gpu->ops->matmul_fwd(gpu, out_nb.d, inp.d, w.d, NULL, wdt, N, IC, OC));
    cmp("matmul_fwd", cfg, &out_nb, tol_for(act, 1e-10, 1e-4));
    for (int flags = 0; flags <= (MT_ACC_DINP | MT_ACC_DW); flags += MT_ACC_DINP | MT_ACC_DW) {
        tp dout = tp_rand((size_t)N * OC, act);
        tp dinp = tp_rand((size_t)N * IC, act), dw = tp_rand((size_t)OC * IC, wdt), db = tp_rand(OC, wdt);
        RUN2(cpu->ops->matmul_bwd(cpu, dinp.h, dw.h, db.h, dout.h, inp.h, w.h, MT_F32, N, IC, OC, flags),
             gpu->ops->matmul_bwd(gpu, dinp.d, dw.d, db.d, dout.d, inp.d, w.d, wdt, N, IC, OC, flags));
        const char *suffix = flags ? " acc" : "";
        char name[64];
        double wt = wdt == MT_F32 && act == MT_F32 ? 1e-10 : 2e-4;
        snprintf(name, sizeof name, "matmul_bwd dinp%s", suffix);
        cmp(name, cfg, &dinp, tol_for(act, 1e-10, 1e-4));
        snprintf(name, sizeof name, "matmul_bwd dw%s", suffix);
        cmp(name, cfg, &dw, wt);
        snprintf(name, sizeof name, "matmul_bwd dbias%s", suffix);
        cmp(name, cfg, &db, wt);
        tp_free(&dout), tp_free(&dinp), tp_free(&dw), tp_free(&db);
    }
    // dinp = NULL and dbias = NULL are allowed
    tp dout = tp_rand((size_t)N * OC, act), dw = tp_rand((size_t)OC * IC, wdt);
    RUN2(cpu->ops->matmul_bwd(cpu, NULL, dw.h, NULL, dout.h, inp.h, w.h, MT_F32, N, IC, OC, 0),
         gpu->ops->matmul_bwd(gpu, NULL, dw.d, NULL, dout.d, inp.d, w.d, wdt, N, IC, OC, 0));
    cmp("matmul_bwd dw only", cfg, &dw, wdt == MT_F32 && act == MT_F32 ? 1e-10 : 2e-4);
    tp_free(&dout), tp_free(&dw);
    tp_free(&inp), tp_free(&w), tp_free(&b), tp_free(&out), tp_free(&out_nb);
}

static void test_rmsnorm(mt_dtype act, mt_dtype wdt, int R, int D) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s w=%s R=%d D=%d", mt_dtype_name(act), mt_dtype_name(wdt), R, D);
    tp inp = tp_new((size_t)R * D, act, -2.f, 2.f), w = tp_new(D, wdt, 0.5f, 1.5f);
    tp out = tp_rand((size_t)R * D, act), rstd = tp_rand(R, MT_F32);
    RUN2(cpu->ops->rmsnorm_fwd(cpu, out.h, rstd.h, inp.h, w.h, MT_F32, R, D, 1e-6f),
         gpu->ops->rmsnorm_fwd(gpu, out.d, (float *)rstd.d, inp.d, w.d, wdt, R, D, 1e-6f));
    cmp("rmsnorm_fwd out", cfg, &out, tol_for(act, 1e-10, 1e-4));
    cmp("rmsnorm_fwd rstd", cfg, &rstd, 1e-10);
    tp dout = tp_rand((size_t)R * D, act), dinp = tp_rand((size_t)R * D, act), dw = tp_rand(D, wdt);
    RUN2(cpu->ops->rmsnorm_bwd(cpu, dinp.h, dw.h, dout.h, inp.h, w.h, rstd.h, MT_F32, R, D),
         gpu->ops->rmsnorm_bwd(gpu, dinp.d, dw.d, dout.d, inp.d, w.d, (const float *)rstd.d, wdt, R, D));
    cmp("rmsnorm_bwd dinp", cfg, &dinp, tol_for(act, 1e-10, 1e-4));
    cmp("rmsnorm_bwd dw", cfg, &dw, wdt == MT_F32 ? 1e-9 : 1e-4);
    tp_free(&inp), tp_free(&w), tp_free(&out), tp_free(&rstd), tp_free(&dout), tp_free(&dinp), tp_free(&dw);
}

static void test_qk_norm(mt_dtype act, mt_dtype wdt, int N, int NH, int NKV, int HD) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s w=%s N=%d %d/%d/%d", mt_dtype_name(act), mt_dtype_name(wdt), N, NH, NKV, HD);
    size_t n = (size_t)N * (NH + 2 * NKV) * HD;
    tp inp = tp_new(n, act, -2.f, 2.f), qw = tp_new(HD, wdt, 0.5f, 1.5f), kw = tp_new(HD, wdt, 0.5f, 1.5f);
    tp out = tp_rand(n, act), rstd = tp_rand((size_t)N * (NH + NKV), MT_F32);
    RUN2(cpu->ops->qk_norm_fwd(cpu, out.h, rstd.h, inp.h, qw.h, kw.h, MT_F32, N, NH, NKV, HD, 1e-6f),
         gpu->ops->qk_norm_fwd(gpu, out.d, (float *)rstd.d, inp.d, qw.d, kw.d, wdt, N, NH, NKV, HD, 1e-6f));
    cmp("qk_norm_fwd out", cfg, &out, tol_for(act, 1e-10, 1e-4));
    cmp("qk_norm_fwd rstd", cfg, &rstd, 1e-10);
    tp dout = tp_rand(n, act), dinp = tp_rand(n, act), dqw = tp_rand(HD, wdt), dkw = tp_rand(HD, wdt);
    RUN2(cpu->ops->qk_norm_bwd(cpu, dinp.h, dqw.h, dkw.h, dout.h, inp.h, qw.h, kw.h, rstd.h, MT_F32, N, NH, NKV, HD),
         gpu->ops->qk_norm_bwd(gpu, dinp.d, dqw.d, dkw.d, dout.d, inp.d, qw.d, kw.d, (const float *)rstd.d, wdt, N, NH,
                               NKV, HD));
    cmp("qk_norm_bwd dinp", cfg, &dinp, tol_for(act, 1e-10, 1e-4));
    cmp("qk_norm_bwd dqw", cfg, &dqw, wdt == MT_F32 ? 1e-9 : 1e-4);
    cmp("qk_norm_bwd dkw", cfg, &dkw, wdt == MT_F32 ? 1e-9 : 1e-4);
    tp_free(&inp), tp_free(&qw), tp_free(&kw), tp_free(&out), tp_free(&rstd);
    tp_free(&dout), tp_free(&dinp), tp_free(&dqw), tp_free(&dkw);
}

static void test_rope(mt_dtype act, int B, int T, int NH, int NKV, int HD) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s B=%d T=%d %d/%d/%d", mt_dtype_name(act), B, T, NH, NKV, HD);
    int half = HD / 2;
    tp cs = tp_rand((size_t)T * half, MT_F32), sn = tp_rand((size_t)T * half, MT_F32);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double inv = pow(10000.0, -2.0 * i / HD);
            cs.h[t * half + i] = (float)cos(t * inv);
            sn.h[t * half + i] = (float)sin(t * inv);
        }
    upload(&cs), upload(&sn);
    size_t n = (size_t)B * T * (NH + 2 * NKV) * HD;
    tp inp = tp_rand(n, act), out = tp_rand(n, act);
    RUN2(cpu->ops->rope_fwd(cpu, out.h, inp.h, cs.h, sn.h, B, T, NH, NKV, HD),
         gpu->ops->rope_fwd(gpu, out.d, inp.d, (const float *)cs.d, (const float *)sn.d, B, T, NH, NKV, HD));
    cmp("rope_fwd", cfg, &out, tol_for(act, 1e-12, 1e-4));
    tp din = tp_rand(n, act);
    RUN2(cpu->ops->rope_bwd(cpu, din.h, inp.h, cs.h, sn.h, B, T, NH, NKV, HD),
         gpu->ops->rope_bwd(gpu, din.d, inp.d, (const float *)cs.d, (const float *)sn.d, B, T, NH, NKV, HD));
    cmp("rope_bwd", cfg, &din, tol_for(act, 1e-12, 1e-4));
    // in place on the GPU must equal out-of-place
    die_on(gpu->ops->rope_fwd(gpu, inp.d, inp.d, (const float *)cs.d, (const float *)sn.d, B, T, NH, NKV, HD), "rope");
    memcpy(inp.h, out.h, n * sizeof(float));
    cmp("rope_fwd in place", cfg, &inp, tol_for(act, 1e-12, 1e-4));
    tp_free(&cs), tp_free(&sn), tp_free(&inp), tp_free(&out), tp_free(&din);
}

static void test_attention(mt_dtype act, int B, int T, int NH, int NKV, int HD) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s B=%d T=%d %d/%d/%d", mt_dtype_name(act), B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * (NH + 2 * NKV) * HD, no = (size_t)B * T * NH * HD;
    tp qkv = tp_new(nq, act, -2.f, 2.f), out = tp_rand(no, act), lse = tp_rand((size_t)B * NH * T, MT_F32);
    RUN2(cpu->ops->attention_fwd(cpu, out.h, lse.h, qkv.h, B, T, NH, NKV, HD),
         gpu->ops->attention_fwd(gpu, out.d, (float *)lse.d, qkv.d, B, T, NH, NKV, HD));
    cmp("attention_fwd out", cfg, &out, tol_for(act, 1e-9, 5e-4));
    cmp("attention_fwd lse", cfg, &lse, tol_for(act, 1e-10, 1e-6));
    // backward from the same saved (out, lse) on both sides: the GPU reads its own
    // out/lse, which match the CPU's within the forward tolerance.
    tp dout = tp_rand(no, act), dqkv = tp_rand(nq, act);
    RUN2(cpu->ops->attention_bwd(cpu, dqkv.h, dout.h, qkv.h, out.h, lse.h, B, T, NH, NKV, HD),
         gpu->ops->attention_bwd(gpu, dqkv.d, dout.d, qkv.d, out.d, (const float *)lse.d, B, T, NH, NKV, HD));
    cmp("attention_bwd dqkv", cfg, &dqkv, tol_for(act, 1e-8, 2e-3));
    tp_free(&qkv), tp_free(&out), tp_free(&lse), tp_free(&dout), tp_free(&dqkv);
}

// The same attention through cuDNN (--attention cudnn on this backend) against the cpu.
// Then the cross-check of the lse contract: cuDNN's forward (out, lse) into the native
// backward of a second backend (native), which must match the cpu as well.
static void test_attention_cudnn(int B, int T, int NH, int NKV, int HD) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "cudnn B=%d T=%d %d/%d/%d", B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * (NH + 2 * NKV) * HD, no = (size_t)B * T * NH * HD;
    tp qkv = tp_new(nq, MT_BF16, -2.f, 2.f), out = tp_rand(no, MT_BF16), lse = tp_rand((size_t)B * NH * T, MT_F32);
    RUN2(cpu->ops->attention_fwd(cpu, out.h, lse.h, qkv.h, B, T, NH, NKV, HD),
         gpu->ops->attention_fwd(gpu, out.d, (float *)lse.d, qkv.d, B, T, NH, NKV, HD));
    cmp("attention_fwd out", cfg, &out, 5e-4);
    cmp("attention_fwd lse", cfg, &lse, 1e-6);
    tp dout = tp_rand(no, MT_BF16), dqkv = tp_rand(nq, MT_BF16), dnat = tp_rand(nq, MT_BF16);
    RUN2(cpu->ops->attention_bwd(cpu, dqkv.h, dout.h, qkv.h, out.h, lse.h, B, T, NH, NKV, HD),
         gpu->ops->attention_bwd(gpu, dqkv.d, dout.d, qkv.d, out.d, (const float *)lse.d, B, T, NH, NKV, HD));
    cmp("attention_bwd dqkv", cfg, &dqkv, 2e-3);
    mt_backend *nat = NULL;
    die_on(mt_backend_cuda_create(MT_BF16, &nat), "create cuda backend (native attention)");
    die_on(mt_backend_set_attention(nat, MT_ATTN_NATIVE), "--attention native");
    die_on(gpu->ops->stream_sync(gpu, MT_STREAM_COMPUTE), "sync");
    die_on(nat->ops->attention_bwd(nat, dnat.d, dout.d, qkv.d, out.d, (const float *)lse.d, B, T, NH, NKV, HD),
           "native attention_bwd from cuDNN's forward");
    die_on(nat->ops->stream_sync(nat, MT_STREAM_COMPUTE), "sync");
    memcpy(dnat.h, dqkv.h, nq * sizeof(float));
    cmp("native attention_bwd after cuDNN's fwd", cfg, &dnat, 2e-3);
    mt_backend_destroy(nat);
    tp_free(&qkv), tp_free(&out), tp_free(&lse), tp_free(&dout), tp_free(&dqkv), tp_free(&dnat);
}

// cuDNN's deterministic backward (MT_CUDNN_DETERMINISTIC=1: no f32 dQ accumulator):
// correct, and bitwise the same on a second run.
static void test_attention_cudnn_deterministic(int B, int T, int NH, int NKV, int HD) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "cudnn deterministic B=%d T=%d %d/%d/%d", B, T, NH, NKV, HD);
    mt_backend *det = NULL;
    setenv("MT_CUDNN_DETERMINISTIC", "1", 1);
    die_on(mt_backend_cuda_create(MT_BF16, &det), "create cuda backend");
    mt_status s = mt_backend_set_attention(det, MT_ATTN_CUDNN);
    unsetenv("MT_CUDNN_DETERMINISTIC");
    die_on(s, "--attention cudnn (deterministic)");
    size_t nq = (size_t)B * T * (NH + 2 * NKV) * HD, no = (size_t)B * T * NH * HD;
    tp qkv = tp_new(nq, MT_BF16, -2.f, 2.f), out = tp_rand(no, MT_BF16), lse = tp_rand((size_t)B * NH * T, MT_F32);
    tp dout = tp_rand(no, MT_BF16), d1 = tp_rand(nq, MT_BF16);
    die_on(cpu->ops->attention_fwd(cpu, out.h, lse.h, qkv.h, B, T, NH, NKV, HD), "cpu attention_fwd");
    die_on(cpu->ops->attention_bwd(cpu, d1.h, dout.h, qkv.h, out.h, lse.h, B, T, NH, NKV, HD), "cpu attention_bwd");
    die_on(det->ops->attention_fwd(det, out.d, (float *)lse.d, qkv.d, B, T, NH, NKV, HD), "cudnn attention_fwd");
    die_on(det->ops->attention_bwd(det, d1.d, dout.d, qkv.d, out.d, (const float *)lse.d, B, T, NH, NKV, HD),
           "cudnn attention_bwd");
    die_on(det->ops->stream_sync(det, MT_STREAM_COMPUTE), "sync");
    cmp("attention_bwd dqkv", cfg, &d1, 2e-3);
    float *first = download(&d1);
    die_on(det->ops->attention_bwd(det, d1.d, dout.d, qkv.d, out.d, (const float *)lse.d, B, T, NH, NKV, HD),
           "cudnn attention_bwd (again)");
    die_on(det->ops->stream_sync(det, MT_STREAM_COMPUTE), "sync");
    float *second = download(&d1);
    CHECK(memcmp(first, second, nq * sizeof(float)) == 0, "[%s] the deterministic backward differs run to run", cfg);
    free(first), free(second);
    mt_backend_destroy(det);
    tp_free(&qkv), tp_free(&out), tp_free(&lse), tp_free(&dout), tp_free(&d1);
}

// The fused residual forms against the cpu: sum = a + b, out = rmsnorm(sum) (sum aliasing
// a, as the layer does) and dacc += rmsnorm_bwd. off shifts the activations by that many
// elements (off = 1: misaligned rows, the scalar instantiation).
static void test_fused_residual_norm(mt_dtype act, mt_dtype wdt, int R, int D, int off) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s w=%s R=%d D=%d off=%d", mt_dtype_name(act), mt_dtype_name(wdt), R, D, off);
    size_t n = (size_t)R * D, o = (size_t)off;
    tp a = tp_new(o + n, act, -2.f, 2.f), b = tp_new(o + n, act, -2.f, 2.f), w = tp_new(D, wdt, 0.5f, 1.5f);
    tp out = tp_rand(o + n, act), rstd = tp_rand(R, MT_F32);
    RUN2(cpu->ops->add_rmsnorm_fwd(cpu, a.h + o, out.h + o, rstd.h, a.h + o, b.h + o, w.h, MT_F32, R, D, 1e-6f),
         gpu->ops->add_rmsnorm_fwd(gpu, dev_at(&a, o), dev_at(&out, o), (float *)rstd.d, dev_at(&a, o), dev_at(&b, o),
                                   w.d, wdt, R, D, 1e-6f));
    cmp("add_rmsnorm_fwd sum", cfg, &a, tol_for(act, 1e-14, 1e-5));
    cmp("add_rmsnorm_fwd out", cfg, &out, tol_for(act, 1e-10, 1e-4));
    cmp("add_rmsnorm_fwd rstd", cfg, &rstd, tol_for(act, 1e-10, 1e-8));
    // backward from the cpu's own sum (rounded to the activation type) and rstd on both sides
    round_to(a.h, a.n, act);
    upload(&a), upload(&rstd);
    tp dout = tp_rand(o + n, act), dacc = tp_rand(o + n, act), dw = tp_rand(D, wdt);
    RUN2(cpu->ops->rmsnorm_bwd_add(cpu, dacc.h + o, dw.h, dout.h + o, a.h + o, w.h, rstd.h, MT_F32, R, D),
         gpu->ops->rmsnorm_bwd_add(gpu, dev_at(&dacc, o), dw.d, dev_at(&dout, o), dev_at(&a, o), w.d,
                                   (const float *)rstd.d, wdt, R, D));
    cmp("rmsnorm_bwd_add dacc", cfg, &dacc, tol_for(act, 1e-10, 1e-4));
    cmp("rmsnorm_bwd_add dw", cfg, &dw, wdt == MT_F32 ? 1e-9 : 1e-4);
    tp_free(&a), tp_free(&b), tp_free(&w), tp_free(&out), tp_free(&rstd), tp_free(&dout), tp_free(&dacc), tp_free(&dw);
}

static void test_swiglu_add_cast(mt_dtype act, int N, int F) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s N=%d F=%d", mt_dtype_name(act), N, F);
    tp gu = tp_new((size_t)N * 2 * F, act, -4.f, 4.f), h = tp_rand((size_t)N * F, act);
    RUN2(cpu->ops->swiglu_fwd(cpu, h.h, gu.h, N, F), gpu->ops->swiglu_fwd(gpu, h.d, gu.d, N, F));
    cmp("swiglu_fwd", cfg, &h, tol_for(act, 1e-10, 1e-4));
    tp dh = tp_rand((size_t)N * F, act), dgu = tp_rand((size_t)N * 2 * F, act);
    RUN2(cpu->ops->swiglu_bwd(cpu, dgu.h, dh.h, gu.h, N, F), gpu->ops->swiglu_bwd(gpu, dgu.d, dh.d, gu.d, N, F));
    cmp("swiglu_bwd", cfg, &dgu, tol_for(act, 1e-10, 1e-4));
    size_t n = (size_t)N * F;
    tp a = tp_rand(n, act), b = tp_rand(n, act), o = tp_rand(n, act);
    RUN2(cpu->ops->add(cpu, o.h, a.h, b.h, n), gpu->ops->add(gpu, o.d, a.d, b.d, n));
    cmp("add", cfg, &o, tol_for(act, 1e-14, 1e-4));
    RUN2(cpu->ops->add(cpu, a.h, a.h, b.h, n), gpu->ops->add(gpu, a.d, a.d, b.d, n));
    cmp("add (aliased)", cfg, &a, tol_for(act, 1e-14, 1e-4));
    // cast f32 -> act and back, against the host conversion
    tp src = tp_rand(n, MT_F32), mid = tp_rand(n, act), back = tp_rand(n, MT_F32);
    die_on(gpu->ops->cast(gpu, mid.d, act, src.d, MT_F32, n), "cast");
    die_on(gpu->ops->cast(gpu, back.d, MT_F32, mid.d, act, n), "cast back");
    memcpy(back.h, src.h, n * sizeof(float));
    round_to(back.h, n, act);
    cmp("cast round trip", cfg, &back, 0.0);
    tp_free(&gu), tp_free(&h), tp_free(&dh), tp_free(&dgu), tp_free(&a), tp_free(&b), tp_free(&o);
    tp_free(&src), tp_free(&mid), tp_free(&back);
}

static void test_xent(mt_dtype act, int n, int V) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s n=%d V=%d", mt_dtype_name(act), n, V);
    tp logits = tp_new((size_t)n * V, act, -8.f, 8.f), losses = tp_rand(n, MT_F32);
    int32_t *tg = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++) tg[i] = (int32_t)(((unsigned)i * 2654435761u) % (unsigned)V);
    void *tgd = dev_i32(tg, n);
    float dscale = 1.0f / n;
    RUN2(cpu->ops->xent_fwd_bwd(cpu, logits.h, losses.h, tg, n, V, dscale),
         gpu->ops->xent_fwd_bwd(gpu, logits.d, (float *)losses.d, tgd, n, V, dscale));
    cmp("xent losses", cfg, &losses, 1e-10);
    cmp("xent dlogits", cfg, &logits, tol_for(act, 1e-9, 1e-4));
    gpu->ops->dev_free(gpu, tgd);
    free(tg);
    tp_free(&logits), tp_free(&losses);
}

static void test_embedding(mt_dtype act, mt_dtype wdt, int V, int N, int C) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s w=%s V=%d N=%d C=%d", mt_dtype_name(act), mt_dtype_name(wdt), V, N, C);
    tp wte = tp_rand((size_t)V * C, wdt), out = tp_rand((size_t)N * C, act);
    int32_t *ids = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(((unsigned)i * 40503u + 7u) % (unsigned)V); // repeats
    void *idd = dev_i32(ids, N);
    RUN2(cpu->ops->embedding_fwd(cpu, out.h, ids, wte.h, MT_F32, N, C),
         gpu->ops->embedding_fwd(gpu, out.d, idd, wte.d, wdt, N, C));
    cmp("embedding_fwd", cfg, &out, tol_for(act, 0.0, 1e-4));
    tp dout = tp_rand((size_t)N * C, act), dwte = tp_rand((size_t)V * C, wdt); // accumulates onto random
    RUN2(cpu->ops->embedding_bwd(cpu, dwte.h, MT_F32, ids, dout.h, N, C),
         gpu->ops->embedding_bwd(gpu, dwte.d, wdt, idd, dout.d, N, C));
    cmp("embedding_bwd (accumulate)", cfg, &dwte, wdt == MT_F32 ? 1e-12 : 1e-4);
    gpu->ops->dev_free(gpu, idd);
    free(ids);
    tp_free(&wte), tp_free(&out), tp_free(&dout), tp_free(&dwte);
}

// ---- what the engine does (engine/layer.c, head.c, step.c) ----

// The MLP / loss-head pattern: chunks of rows through row-offset pointers, dW
// accumulated (MT_ACC_DW) after the first chunk, dbias NULL; against one full
// cpu call. `off` shifts every activation by that many elements (off = 1 gives
// 2- or 4-byte aligned pointers: cuBLASLt alignment keys / the GEMM fallback).
static void test_matmul_chunked(mt_dtype act, mt_dtype wdt, int N, int IC, int OC, int R, int off) {
    char cfg[128];
    snprintf(cfg, sizeof cfg, "act=%s w=%s %dx%dx%d R=%d off=%d", mt_dtype_name(act), mt_dtype_name(wdt), N, IC, OC, R,
             off);
    size_t o = (size_t)off;
    tp inp = tp_rand(o + (size_t)N * IC, act), w = tp_rand((size_t)OC * IC, wdt), out = tp_rand(o + (size_t)N * OC, act);
    tp dout = tp_rand(o + (size_t)N * OC, act), dinp = tp_rand(o + (size_t)N * IC, act), dw = tp_rand((size_t)OC * IC, wdt);
    die_on(cpu->ops->matmul_fwd(cpu, out.h + o, inp.h + o, w.h, NULL, MT_F32, N, IC, OC), "cpu matmul_fwd");
    die_on(cpu->ops->matmul_bwd(cpu, dinp.h + o, dw.h, NULL, dout.h + o, inp.h + o, w.h, MT_F32, N, IC, OC, 0),
           "cpu matmul_bwd");
    for (int r0 = 0; r0 < N; r0 += R) {
        int n = N - r0 < R ? N - r0 : R;
        die_on(gpu->ops->matmul_fwd(gpu, dev_at(&out, o + (size_t)r0 * OC), dev_at(&inp, o + (size_t)r0 * IC), w.d, NULL,
                                    wdt, n, IC, OC),
               "cuda matmul_fwd chunk");
        die_on(gpu->ops->matmul_bwd(gpu, dev_at(&dinp, o + (size_t)r0 * IC), dw.d, NULL, dev_at(&dout, o + (size_t)r0 * OC),
                                    dev_at(&inp, o + (size_t)r0 * IC), w.d, wdt, n, IC, OC, r0 > 0 ? MT_ACC_DW : 0),
               "cuda matmul_bwd chunk");
    }
    cmp("matmul_fwd chunked", cfg, &out, tol_for(act, 1e-10, 1e-4));
    cmp("matmul_bwd chunked dinp", cfg, &dinp, tol_for(act, 1e-10, 1e-4));
    cmp("matmul_bwd chunked dw (ACC_DW)", cfg, &dw, wdt == MT_F32 && act == MT_F32 ? 1e-10 : 2e-4);
    tp_free(&inp), tp_free(&w), tp_free(&out), tp_free(&dout), tp_free(&dinp), tp_free(&dw);
}

// Loss head: xent on chunks of rows with the losses/targets pointers offset.
static void test_xent_chunked(mt_dtype act, int n, int V, int R) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s n=%d V=%d R=%d", mt_dtype_name(act), n, V, R);
    tp logits = tp_new((size_t)n * V, act, -8.f, 8.f), losses = tp_rand(n, MT_F32);
    int32_t *tg = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++) tg[i] = (int32_t)(((unsigned)i * 2654435761u) % (unsigned)V);
    int32_t *tgd = dev_i32(tg, n);
    float dscale = 1.0f / n;
    die_on(cpu->ops->xent_fwd_bwd(cpu, logits.h, losses.h, tg, n, V, dscale), "cpu xent");
    for (int r0 = 0; r0 < n; r0 += R) {
        int m = n - r0 < R ? n - r0 : R;
        die_on(gpu->ops->xent_fwd_bwd(gpu, dev_at(&logits, (size_t)r0 * V), (float *)losses.d + r0, tgd + r0, m, V, dscale),
               "cuda xent chunk");
    }
    cmp("xent chunked losses", cfg, &losses, 1e-10);
    cmp("xent chunked dlogits", cfg, &logits, tol_for(act, 1e-9, 1e-4));
    gpu->ops->dev_free(gpu, tgd);
    free(tg);
    tp_free(&logits), tp_free(&losses);
}

// rope_bwd in place (dinp == dout), as layer.c calls it, vs the cpu out of place.
static void test_rope_bwd_inplace(mt_dtype act, int B, int T, int NH, int NKV, int HD) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s B=%d T=%d %d/%d/%d", mt_dtype_name(act), B, T, NH, NKV, HD);
    int half = HD / 2;
    tp cs = tp_rand((size_t)T * half, MT_F32), sn = tp_rand((size_t)T * half, MT_F32);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double inv = pow(10000.0, -2.0 * i / HD);
            cs.h[t * half + i] = (float)cos(t * inv);
            sn.h[t * half + i] = (float)sin(t * inv);
        }
    upload(&cs), upload(&sn);
    size_t n = (size_t)B * T * (NH + 2 * NKV) * HD;
    tp d = tp_rand(n, act);
    float *ref = host_f32(n);
    die_on(cpu->ops->rope_bwd(cpu, ref, d.h, cs.h, sn.h, B, T, NH, NKV, HD), "cpu rope_bwd");
    die_on(gpu->ops->rope_bwd(gpu, d.d, d.d, (const float *)cs.d, (const float *)sn.d, B, T, NH, NKV, HD), "rope_bwd");
    memcpy(d.h, ref, n * sizeof(float));
    cmp("rope_bwd in place", cfg, &d, tol_for(act, 1e-12, 1e-4));
    free(ref);
    tp_free(&cs), tp_free(&sn), tp_free(&d);
}

// Embedding backward with many repeats of few ids (a frequent token): the sum of
// a run must round once (the cpu does), and C > 256 columns, not a multiple.
// untied: the engine zeroes dwte with memset_zero on the compute stream first;
// tied: dwte already holds the LM head's gradient.
static void test_embedding_repeats(mt_dtype act, mt_dtype wdt, int V, int N, int C, int tied) {
    char cfg[96];
    snprintf(cfg, sizeof cfg, "act=%s w=%s V=%d N=%d C=%d %s", mt_dtype_name(act), mt_dtype_name(wdt), V, N, C,
             tied ? "tied" : "zeroed");
    int32_t *ids = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(((unsigned)i * 2654435761u >> 7) % (unsigned)V);
    int32_t *idd = dev_i32(ids, N);
    tp dout = tp_rand((size_t)N * C, act), dwte = tp_rand((size_t)V * C, wdt);
    if (!tied) {
        memset(dwte.h, 0, (size_t)V * C * sizeof(float));
        die_on(gpu->ops->memset_zero(gpu, dwte.d, (size_t)V * C * mt_dtype_size(wdt), MT_STREAM_COMPUTE), "memset_zero");
    }
    RUN2(cpu->ops->embedding_bwd(cpu, dwte.h, MT_F32, ids, dout.h, N, C),
         gpu->ops->embedding_bwd(gpu, dwte.d, wdt, idd, dout.d, N, C));
    // one bf16 rounding of an f32 sum: nmse ~1e-6; per-add bf16 rounding is ~1e-3
    cmp("embedding_bwd repeats", cfg, &dwte, wdt == MT_F32 ? 1e-14 : 2e-5);
    gpu->ops->dev_free(gpu, idd);
    free(ids);
    tp_free(&dout), tp_free(&dwte);
}

// A kernel that uses the backend's scratch, then (no host sync between) one that
// needs a larger scratch: the growth must not free memory still being read.
// Run on a fresh backend (empty scratch); compute-sanitizer memcheck watches it.
static void test_scratch_growth(mt_dtype act) {
    char cfg[64];
    snprintf(cfg, sizeof cfg, "act=%s", mt_dtype_name(act));
    int R = 300, D = 64, V = 11, N = 200000, C = 32; // 3 N int32 > the first 1 MiB scratch
    tp inp = tp_new((size_t)R * D, act, -2.f, 2.f), w = tp_new(D, MT_F32, 0.5f, 1.5f), rstd = tp_rand(R, MT_F32);
    tp out = tp_rand((size_t)R * D, act), dout = tp_rand((size_t)R * D, act), dinp = tp_rand((size_t)R * D, act);
    tp dw = tp_rand(D, MT_F32);
    RUN2(cpu->ops->rmsnorm_fwd(cpu, out.h, rstd.h, inp.h, w.h, MT_F32, R, D, 1e-6f),
         gpu->ops->rmsnorm_fwd(gpu, out.d, (float *)rstd.d, inp.d, w.d, MT_F32, R, D, 1e-6f));
    int32_t *ids = malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((unsigned)i * 7919u % (unsigned)V);
    int32_t *idd = dev_i32(ids, N);
    tp edout = tp_rand((size_t)N * C, act), dwte = tp_rand((size_t)V * C, MT_F32);
    RUN2(cpu->ops->rmsnorm_bwd(cpu, dinp.h, dw.h, dout.h, inp.h, w.h, rstd.h, MT_F32, R, D),
         gpu->ops->rmsnorm_bwd(gpu, dinp.d, dw.d, dout.d, inp.d, w.d, (const float *)rstd.d, MT_F32, R, D));
    RUN2(cpu->ops->embedding_bwd(cpu, dwte.h, MT_F32, ids, edout.h, N, C), // grows the scratch
         gpu->ops->embedding_bwd(gpu, dwte.d, MT_F32, idd, edout.d, N, C));
    cmp("scratch growth: rmsnorm_bwd dw", cfg, &dw, 1e-9);
    cmp("scratch growth: embedding_bwd", cfg, &dwte, 1e-12);
    gpu->ops->dev_free(gpu, idd);
    free(ids);
    tp_free(&inp), tp_free(&w), tp_free(&rstd), tp_free(&out), tp_free(&dout), tp_free(&dinp), tp_free(&dw);
    tp_free(&edout), tp_free(&dwte);
}

// Streams and events as the engine uses them: waits on never-recorded events
// are no-ops (first step), elapsed time between events of different streams,
// memset/copy on every stream, casts of odd lengths (a whole unit's numel).
static void test_streams_events(mt_dtype act) {
    mt_event *never, *a, *b;
    die_on(gpu->ops->event_create(gpu, &never), "event_create");
    die_on(gpu->ops->event_create(gpu, &a), "event_create");
    die_on(gpu->ops->event_create(gpu, &b), "event_create");
    for (int s = 0; s < MT_NUM_STREAMS; s++)
        CHECK(gpu->ops->stream_wait(gpu, (mt_stream_id)s, never) == MT_OK, "wait on a never-recorded event (stream %d)",
              s);
    CHECK(gpu->ops->event_sync(gpu, never) == MT_OK, "event_sync on a never-recorded event returns at once");
    size_t n = 1001; // not a multiple of any vector width
    tp x = tp_rand(n, act), y = tp_rand(n, act);
    for (int s = 0; s < MT_NUM_STREAMS; s++) {
        die_on(gpu->ops->memset_zero(gpu, x.d, n * mt_dtype_size(act), (mt_stream_id)s), "memset_zero");
        die_on(gpu->ops->stream_sync(gpu, (mt_stream_id)s), "stream_sync");
        memset(x.h, 0, n * sizeof(float));
        char what[48];
        snprintf(what, sizeof what, "memset_zero on stream %d", s);
        cmp(what, mt_dtype_name(act), &x, 0.0);
        die_on(gpu->ops->copy(gpu, x.d, y.d, n * mt_dtype_size(act), MT_COPY_D2D, (mt_stream_id)s), "copy d2d");
        die_on(gpu->ops->stream_sync(gpu, (mt_stream_id)s), "stream_sync");
        memcpy(x.h, y.h, n * sizeof(float));
        snprintf(what, sizeof what, "copy d2d on stream %d", s);
        cmp(what, mt_dtype_name(act), &x, 0.0);
    }
    die_on(gpu->ops->event_record(gpu, a, MT_STREAM_COMPUTE), "record");
    die_on(gpu->ops->copy(gpu, x.d, y.d, n * mt_dtype_size(act), MT_COPY_D2D, MT_STREAM_H2D), "copy");
    die_on(gpu->ops->event_record(gpu, b, MT_STREAM_D2H), "record");
    die_on(gpu->ops->event_sync(gpu, b), "event_sync");
    die_on(gpu->ops->stream_sync(gpu, MT_STREAM_COMPUTE), "stream_sync");
    float ms = -1;
    mt_status st = gpu->ops->event_elapsed_ms(gpu, a, b, &ms);
    CHECK(st == MT_OK && isfinite(ms), "elapsed between events on different streams (%s)", mt_last_error());
    size_t lens[] = {1, 7, 1001, 65537};
    for (int i = 0; i < 4; i++) {
        tp src = tp_rand(lens[i], MT_F32), mid = tp_rand(lens[i], MT_BF16), back = tp_rand(lens[i], MT_F32);
        die_on(gpu->ops->cast(gpu, mid.d, MT_BF16, src.d, MT_F32, lens[i]), "cast");
        die_on(gpu->ops->cast(gpu, back.d, MT_F32, mid.d, MT_BF16, lens[i]), "cast back");
        memcpy(back.h, src.h, lens[i] * sizeof(float));
        round_to(back.h, lens[i], MT_BF16);
        char cfg[32];
        snprintf(cfg, sizeof cfg, "n=%zu", lens[i]);
        cmp("cast f32->bf16->f32 odd n", cfg, &back, 0.0);
        tp_free(&src), tp_free(&mid), tp_free(&back);
    }
    gpu->ops->event_destroy(gpu, never), gpu->ops->event_destroy(gpu, a), gpu->ops->event_destroy(gpu, b);
    tp_free(&x), tp_free(&y);
}

static void test_runtime(int deliberate_errors) {
    mt_device_info info;
    die_on(gpu->ops->device_info(gpu, &info), "device_info");
    fprintf(stderr, "test_cuda_ops: %s, %.1f GiB (%.1f free), NUMA node %d\n", info.name,
            info.mem_total_bytes / 1073741824.0, info.mem_free_bytes / 1073741824.0, info.numa_node);
    CHECK(info.mem_total_bytes > 0 && info.mem_free_bytes <= info.mem_total_bytes, "device memory info");
    void *hp = NULL;
    die_on(gpu->ops->host_alloc(gpu, 3 << 20, &hp), "host_alloc");
    CHECK(((uintptr_t)hp & 4095u) == 0, "pinned host memory is page-aligned");
    void *dp = NULL;
    die_on(gpu->ops->dev_alloc(gpu, 3 << 20, &dp), "dev_alloc");
    mt_event *e0, *e1, *e2;
    die_on(gpu->ops->event_create(gpu, &e0), "event_create");
    die_on(gpu->ops->event_create(gpu, &e1), "event_create");
    die_on(gpu->ops->event_create(gpu, &e2), "event_create");
    memset(hp, 0x5a, 3 << 20);
    die_on(gpu->ops->event_record(gpu, e0, MT_STREAM_H2D), "record");
    die_on(gpu->ops->copy(gpu, dp, hp, 3 << 20, MT_COPY_H2D, MT_STREAM_H2D), "h2d");
    die_on(gpu->ops->event_record(gpu, e1, MT_STREAM_H2D), "record");
    die_on(gpu->ops->stream_wait(gpu, MT_STREAM_D2H, e1), "stream_wait");
    die_on(gpu->ops->event_sync(gpu, e1), "event_sync"); // the h2d copy has read hp
    memset(hp, 0, 1 << 20);
    die_on(gpu->ops->copy(gpu, hp, dp, 1 << 20, MT_COPY_D2H, MT_STREAM_D2H), "d2h");
    die_on(gpu->ops->event_record(gpu, e2, MT_STREAM_D2H), "record");
    die_on(gpu->ops->stream_sync(gpu, MT_STREAM_D2H), "stream_sync");
    float ms = -1;
    die_on(gpu->ops->event_elapsed_ms(gpu, e0, e1, &ms), "elapsed");
    CHECK(ms >= 0, "event timing %.3f ms", ms);
    CHECK(((unsigned char *)hp)[12345] == 0x5a, "h2d then d2h round trip across streams");
    if (deliberate_errors) { // a cudaMalloc error on purpose: left out under compute-sanitizer (see the top)
        void *huge = NULL;
        mt_status s = gpu->ops->dev_alloc(gpu, (size_t)1 << 50, &huge);
        CHECK(s == MT_ERR_MEMORY && huge == NULL, "a 1 PiB dev_alloc fails cleanly (%s)", mt_last_error());
    }
    gpu->ops->event_destroy(gpu, e0), gpu->ops->event_destroy(gpu, e1), gpu->ops->event_destroy(gpu, e2);
    gpu->ops->dev_free(gpu, dp);
    gpu->ops->host_free(gpu, hp, 3 << 20);
}

int main(int argc, char **argv) {
    int deliberate_errors = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-deliberate-errors")) {
            deliberate_errors = 0;
        } else {
            fprintf(stderr, "test_cuda_ops: unknown argument '%s' (usage: test_cuda_ops [--no-deliberate-errors])\n",
                    argv[i]);
            return 2;
        }
    }
    verbose = getenv("MT_TEST_VERBOSE") != NULL;
    if (!mt_backend_cuda_available()) {
        fprintf(stderr, "test_cuda_ops: skipped (no CUDA device)\n");
        return 77;
    }
    die_on(mt_backend_create("cpu", MT_F32, &cpu), "create cpu backend");
    for (int ai = 0; ai < 2; ai++) {
        mt_dtype act = ai ? MT_BF16 : MT_F32;
        die_on(mt_backend_cuda_create(act, &gpu), "create cuda backend");
        fprintf(stderr, "test_cuda_ops: activations %s\n", mt_dtype_name(act));
        test_scratch_growth(act); // first: needs the fresh backend's empty scratch
        if (ai == 0) test_runtime(deliberate_errors);
        // the native kernels unless this run is about cuDNN (below)
        die_on(mt_backend_set_attention(gpu, MT_ATTN_NATIVE), "--attention native");
        test_streams_events(act);
        for (int wi = 0; wi < 2; wi++) {
            mt_dtype wdt = wi ? MT_BF16 : MT_F32;
            test_matmul(act, wdt, 96, 80, 136);
            test_matmul(act, wdt, 200, 256, 64);
            test_rmsnorm(act, wdt, 37, 200);
            test_qk_norm(act, wdt, 19, 4, 2, 64);
            test_embedding(act, wdt, 50, 40, 72);
            test_embedding_repeats(act, wdt, 7, 3000, 300, 0);
            test_embedding_repeats(act, wdt, 13, 2048, 64, 1);
            test_matmul_chunked(act, wdt, 50, 64, 96, 16, 0); // MLP chunks: 16,16,16,2
            test_matmul_chunked(act, wdt, 37, 64, 40, 10, 1); // misaligned row pointers
        }
        test_matmul(act, MT_F32, 33, 17, 29); // odd shapes, unaligned rows (bf16: may need the GEMM fallback)
        test_matmul(act, MT_BF16, 33, 17, 29);
        {   // every GEMM through the classic-cuBLAS fallback
            mt_backend *keep = gpu;
            setenv("MT_GEMM_FALLBACK", "1", 1);
            die_on(mt_backend_cuda_create(act, &gpu), "create cuda backend (GEMM fallback)");
            unsetenv("MT_GEMM_FALLBACK");
            fprintf(stderr, "test_cuda_ops: GEMM fallback (MT_GEMM_FALLBACK=1)\n");
            test_matmul(act, act, 96, 80, 136);
            test_matmul(act, MT_BF16, 33, 17, 29);
            test_matmul_chunked(act, act, 37, 64, 40, 10, 1);
            mt_backend_destroy(gpu);
            gpu = keep;
        }
        test_xent_chunked(act, 10, 5003, 3);
        test_rope_bwd_inplace(act, 3, 13, 4, 2, 32);
        test_attention(act, 3, 45, 4, 1, 64);   // B > 1, odd T, rep 4 (mma for bf16)
        test_attention(act, 2, 67, 2, 2, 128);  // B > 1, T = one tile + 3
        test_attention(act, 3, 19, 4, 2, 32);   // B > 1, T < tile
        test_rope(act, 2, 13, 4, 2, 32);
        test_attention(act, 2, 77, 4, 2, 64);   // GQA, tail tile, mma path for bf16
        test_attention(act, 1, 130, 2, 1, 128); // HD 128, T not a multiple of 64
        test_attention(act, 1, 70, 6, 2, 96);   // rep 3
        test_attention(act, 2, 5, 2, 1, 32);    // T shorter than a tile
        test_attention(act, 1, 33, 3, 3, 40);   // odd head size: simple path for both dtypes
        test_attention(act, 1, 300, 2, 2, 80);  // simple path, several tiles
        for (int wi = 0; wi < 2; wi++) {
            mt_dtype wdt = wi ? MT_BF16 : MT_F32;
            test_fused_residual_norm(act, wdt, 37, 200, 0); // D a multiple of 8: 128-bit rows
            test_fused_residual_norm(act, wdt, 19, 100, 0); // bf16: D % 8 != 0, scalar rows
            test_fused_residual_norm(act, wdt, 23, 64, 1);  // misaligned rows: scalar
        }
        test_swiglu_add_cast(act, 21, 300);
        test_swiglu_add_cast(act, 13, 256); // F a multiple of 8: 128-bit rows for both dtypes
        test_rope(act, 2, 9, 2, 1, 20);     // HD/2 = 10: the scalar RoPE
        test_embedding(act, MT_F32, 40, 33, 64);
        test_embedding(act, MT_BF16, 40, 33, 64);
        test_xent(act, 7, 5003);
        test_xent(act, 3, 151936);
        mt_backend_destroy(gpu);
        gpu = NULL;
    }
    // cuDNN's fused attention (bf16 only), explicitly chosen: a failure to plan is an error.
    die_on(mt_backend_cuda_create(MT_BF16, &gpu), "create cuda backend");
    mt_status s = mt_backend_set_attention(gpu, MT_ATTN_CUDNN);
    const char *req = getenv("MT_REQUIRE_CUDNN");
    if (s != MT_OK) {
        fprintf(stderr, "test_cuda_ops: cuDNN attention %s: %s\n", req && req[0] == '1' ? "FAILED" : "skipped",
                mt_last_error());
        CHECK(!(req && req[0] == '1'), "MT_REQUIRE_CUDNN=1 but cuDNN's attention is unavailable");
    } else {
        fprintf(stderr, "test_cuda_ops: attention through cuDNN\n");
        test_attention_cudnn(2, 77, 4, 2, 64);   // GQA, odd T
        test_attention_cudnn(1, 130, 8, 2, 128); // HD 128, rep 4, T just past a 128 tile
        test_attention_cudnn(3, 45, 4, 1, 64);   // MQA, B > 1
        test_attention_cudnn(1, 257, 4, 4, 128); // MHA, odd T
        test_attention_cudnn(2, 512, 8, 2, 64);  // T a multiple of 128
        test_attention_cudnn(1, 1000, 4, 2, 128); // several tiles, T % 128 != 0
        test_attention_cudnn(2, 5, 2, 1, 64);    // T shorter than any tile
        test_attention_cudnn_deterministic(2, 77, 4, 2, 64);
    }
    mt_backend_destroy(gpu);
    gpu = NULL;
    mt_backend_destroy(cpu);
    return mt_test_finish("test_cuda_ops");
}
#endif
