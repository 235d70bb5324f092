// attention.cu: causal GQA attention lab. Versions, each checked against a
// double-precision CPU reference and timed with CUDA events:
//   v1  naive: one thread per query row, two passes over the keys (kept as the
//       first, obviously-correct GPU version)
//   v2  simple: warp per row, K/V tiles in shared memory, online softmax, f32 math
//       (the backend's fp32 path; attention_kernels.cuh)
//   v3  mma: FlashAttention-2 style, mma.sync m16n8k16 bf16 (the backend's native bf16 path)
//   v4  cuDNN's fused flash attention through its graph API (the backend's
//       --attention cudnn: ../cudnn_attention.c), when libcudnn.so.9 loads
// Backward: v2 (f32), v3 and v4 (bf16).
// usage: ./attention [B T NH NKV HD]   (benchmark shape; default 1 4096 32 8 128)
//        ./attention --sweep [NH NKV HD] (native v3 vs cuDNN v4, forward + backward, B = 1 at
//        T = 1k, 2k, ..., 128k; default 28 4 128, Qwen2.5-7B's attention; one JSON line per
//        implementation and length, "bench" named as torch_reference.py names SDPA's)
#include "lab_common.h"
#include "lab_device.h"
#include "../attention_kernels.cuh"
#ifndef MT_LAB_NO_CUDNN
#include "../cudnn_attention.h"
#else // built where the cuDNN headers are missing: v4 reports itself skipped
#include "core/status.h"
typedef struct mt_cudnn_attn mt_cudnn_attn;
static mt_status mt_cudnn_attn_create(cudaStream_t, mt_cudnn_attn **out) {
    *out = NULL;
    return mt_fail(MT_ERR_UNSUPPORTED, "built without the cuDNN headers");
}
static void mt_cudnn_attn_destroy(mt_cudnn_attn *) {}
static const char *mt_cudnn_attn_describe(const mt_cudnn_attn *) { return ""; }
static const char *mt_cudnn_attn_unsupported(int, int, const void *const *, int) { return "no cuDNN"; }
static mt_status mt_cudnn_attn_fwd(mt_cudnn_attn *, void *, float *, const void *, int, int, int, int, int) {
    return MT_ERR_UNSUPPORTED;
}
static mt_status mt_cudnn_attn_bwd(mt_cudnn_attn *, void *, const void *, const void *, const void *, const float *, int,
                                   int, int, int, int) {
    return MT_ERR_UNSUPPORTED;
}
#endif

static mt_cudnn_attn *g_cudnn; // NULL: cuDNN did not load (v4 skipped, said once)

// ---- v1: naive ----
template <typename A> __global__ void attn_fwd_naive(A *out, float *lse, const A *qkv, attn_params p) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= p.B * p.NH * p.T) return;
    int i = idx % p.T, h = (idx / p.T) % p.NH, b = idx / (p.T * p.NH), kvh = h / p.rep;
    size_t qo = attn_q_off(p, b, i, h);
    float m = -INFINITY;
    for (int j = 0; j <= i; j++) {
        float s = 0.f;
        for (int d = 0; d < p.HD; d++) s += mt_ld(qkv, qo + d) * mt_ld(qkv, attn_k_off(p, b, j, kvh) + d);
        m = fmaxf(m, s * p.scale);
    }
    float l = 0.f;
    for (int j = 0; j <= i; j++) {
        float s = 0.f;
        for (int d = 0; d < p.HD; d++) s += mt_ld(qkv, qo + d) * mt_ld(qkv, attn_k_off(p, b, j, kvh) + d);
        l += expf(s * p.scale - m);
    }
    size_t oo = attn_o_off(p, b, i, h);
    for (int d = 0; d < p.HD; d++) {
        float acc = 0.f;
        for (int j = 0; j <= i; j++) {
            float s = 0.f;
            for (int e = 0; e < p.HD; e++) s += mt_ld(qkv, qo + e) * mt_ld(qkv, attn_k_off(p, b, j, kvh) + e);
            acc += expf(s * p.scale - m) * mt_ld(qkv, attn_v_off(p, b, j, kvh) + d);
        }
        mt_st(out, oo + d, acc / l);
    }
    lse[attn_lse_off(p, b, h, i)] = m + logf(l);
}

static attn_params mkp(int B, int T, int NH, int NKV, int HD) {
    attn_params p = {B, T, NH, NKV, HD, NH / NKV, (size_t)(NH + 2 * NKV) * HD, (size_t)NH * HD,
                     1.0f / sqrtf((float)HD)};
    return p;
}

// ---- CPU reference (double) ----
static void ref_fwd(float *out, float *lse, const float *qkv, attn_params p) {
    double *s = (double *)malloc(sizeof(double) * p.T);
    for (int b = 0; b < p.B; b++)
        for (int h = 0; h < p.NH; h++)
            for (int i = 0; i < p.T; i++) {
                int kvh = h / p.rep;
                const float *q = qkv + ((size_t)b * p.T + i) * p.qkv_stride + (size_t)h * p.HD;
                double m = -INFINITY, l = 0;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * p.T + j) * p.qkv_stride + (size_t)(p.NH + kvh) * p.HD;
                    double acc = 0;
                    for (int d = 0; d < p.HD; d++) acc += (double)q[d] * k[d];
                    s[j] = acc * p.scale;
                    if (s[j] > m) m = s[j];
                }
                for (int j = 0; j <= i; j++) l += exp(s[j] - m);
                float *o = out + ((size_t)b * p.T + i) * p.o_stride + (size_t)h * p.HD;
                for (int d = 0; d < p.HD; d++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++)
                        acc += exp(s[j] - m) / l *
                               qkv[((size_t)b * p.T + j) * p.qkv_stride + (size_t)(p.NH + p.NKV + kvh) * p.HD + d];
                    o[d] = (float)acc;
                }
                lse[((size_t)b * p.NH + h) * p.T + i] = (float)(m + log(l));
            }
    free(s);
}

static void ref_bwd(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse, attn_params p) {
    memset(dqkv, 0, sizeof(float) * (size_t)p.B * p.T * p.qkv_stride);
    for (int b = 0; b < p.B; b++)
        for (int h = 0; h < p.NH; h++)
            for (int i = 0; i < p.T; i++) {
                int kvh = h / p.rep;
                size_t row = ((size_t)b * p.T + i);
                const float *q = qkv + row * p.qkv_stride + (size_t)h * p.HD;
                const float *g = dout + row * p.o_stride + (size_t)h * p.HD, *o = out + row * p.o_stride + (size_t)h * p.HD;
                double D = 0;
                for (int d = 0; d < p.HD; d++) D += (double)g[d] * o[d];
                float *dq = dqkv + row * p.qkv_stride + (size_t)h * p.HD;
                for (int j = 0; j <= i; j++) {
                    size_t rj = ((size_t)b * p.T + j) * p.qkv_stride;
                    const float *k = qkv + rj + (size_t)(p.NH + kvh) * p.HD, *v = qkv + rj + (size_t)(p.NH + p.NKV + kvh) * p.HD;
                    float *dk = dqkv + rj + (size_t)(p.NH + kvh) * p.HD, *dv = dqkv + rj + (size_t)(p.NH + p.NKV + kvh) * p.HD;
                    double s = 0, dp = 0;
                    for (int d = 0; d < p.HD; d++) {
                        s += (double)q[d] * k[d];
                        dp += (double)g[d] * v[d];
                    }
                    double P = exp(s * p.scale - lse[((size_t)b * p.NH + h) * p.T + i]);
                    double ds = P * (dp - D);
                    for (int d = 0; d < p.HD; d++) {
                        dq[d] += (float)(ds * k[d] * p.scale);
                        dk[d] += (float)(ds * q[d] * p.scale);
                        dv[d] += (float)(P * g[d]);
                    }
                }
            }
}

template <typename A, int NC> static void run_v2_fwd(A *o, float *l, const A *q, attn_params p) {
    size_t sm = attn_simple_fwd_smem(p.HD);
    LAB_CHECK(cudaFuncSetAttribute(attn_fwd_simple_kernel<A, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
    dim3 g((p.T + ATTN_SW - 1) / ATTN_SW, p.NH, p.B);
    attn_fwd_simple_kernel<A, NC><<<g, ATTN_SW * 32, sm>>>(o, l, q, p);
}
template <int HD> static void run_v3_fwd(mt_bf16 *o, float *l, const mt_bf16 *q, attn_params p) {
    size_t sm = attn_mma_fwd_smem<HD>();
    LAB_CHECK(cudaFuncSetAttribute(attn_fwd_mma_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
    dim3 g((p.T + ATTN_MQ - 1) / ATTN_MQ, p.NH, p.B);
    attn_fwd_mma_kernel<HD><<<g, ATTN_MW * 32, sm>>>(o, l, q, p);
}
template <typename A> static void run_dot(float *D, const A *g, const A *o, attn_params p) {
    size_t rows = (size_t)p.B * p.T * p.NH;
    attn_bwd_dot_kernel<A><<<(unsigned)((rows + 7) / 8), 256>>>(D, g, o, p);
}
template <typename A, int NC>
static void run_v2_bwd(A *dqkv, const A *g, const A *q, const A *o, const float *l, float *D, attn_params p) {
    run_dot<A>(D, g, o, p);
    size_t s1 = attn_simple_dq_smem(p.HD), s2 = attn_simple_dkv_smem(p.HD);
    LAB_CHECK(cudaFuncSetAttribute(attn_dq_simple_kernel<A, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s1));
    LAB_CHECK(cudaFuncSetAttribute(attn_dkv_simple_kernel<A, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s2));
    dim3 gq((p.T + ATTN_SW - 1) / ATTN_SW, p.NH, p.B), gk((p.T + ATTN_SW - 1) / ATTN_SW, p.NKV, p.B);
    attn_dq_simple_kernel<A, NC><<<gq, ATTN_SW * 32, s1>>>(dqkv, g, q, l, D, p);
    attn_dkv_simple_kernel<A, NC><<<gk, ATTN_SW * 32, s2>>>(dqkv, g, q, l, D, p);
}
template <int HD>
static void run_v3_bwd(mt_bf16 *dqkv, const mt_bf16 *g, const mt_bf16 *q, const mt_bf16 *o, const float *l,
                       float *D, attn_params p) {
    run_dot<mt_bf16>(D, g, o, p);
    size_t s1 = attn_mma_dq_smem<HD>(), s2 = attn_mma_dkv_smem<HD>();
    LAB_CHECK(cudaFuncSetAttribute(attn_dq_mma_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s1));
    LAB_CHECK(cudaFuncSetAttribute(attn_dkv_mma_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s2));
    dim3 gq((p.T + ATTN_MQ - 1) / ATTN_MQ, p.NH, p.B), gk((p.T + ATTN_MK - 1) / ATTN_MK, p.NKV, p.B);
    attn_dq_mma_kernel<HD><<<gq, ATTN_MW * 32, s1>>>(dqkv, g, q, l, D, p);
    attn_dkv_mma_kernel<HD><<<gk, ATTN_MW * 32, s2>>>(dqkv, g, q, l, D, p);
}

static int failures = 0;
static void report(const char *what, double nmse, double tol) {
    int ok = nmse <= tol && isfinite(nmse);
    printf("  %-34s nmse %.3e  %s\n", what, nmse, ok ? "ok" : "WRONG");
    if (!ok) failures++;
}

// HD is a template parameter so the mma kernels can be instantiated (64 or 128 here).
template <int HD> static void check(int B, int T, int NH, int NKV) {
    attn_params p = mkp(B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * p.qkv_stride, no = (size_t)B * T * p.o_stride, nl = (size_t)B * NH * T;
    printf("# check B=%d T=%d NH=%d NKV=%d HD=%d\n", B, T, NH, NKV, HD);
    float *qkv = (float *)malloc(nq * 4), *g = (float *)malloc(no * 4);
    lab_fill(qkv, nq, 1, -2, 2);
    lab_fill(g, no, 2, -1, 1);
    lab_round_bf16(qkv, nq); // one input set for both precisions
    lab_round_bf16(g, no);
    float *ro = (float *)malloc(no * 4), *rl = (float *)malloc(nl * 4), *rd = (float *)malloc(nq * 4);
    ref_fwd(ro, rl, qkv, p);
    ref_bwd(rd, g, qkv, ro, rl, p);
    float *ho = (float *)malloc(no * 4), *hl = (float *)malloc(nl * 4), *hd = (float *)malloc(nq * 4);
    float *dl, *dD;
    LAB_CHECK(cudaMalloc(&dl, nl * 4));
    LAB_CHECK(cudaMalloc(&dD, nl * 4));
    { // f32
        float *q = lab_upload<float>(qkv, nq), *gg = lab_upload<float>(g, no), *o, *dq;
        LAB_CHECK(cudaMalloc(&o, no * 4));
        LAB_CHECK(cudaMalloc(&dq, nq * 4));
        int threads = 128, rows = B * NH * T;
        attn_fwd_naive<float><<<(rows + threads - 1) / threads, threads>>>(o, dl, q, p);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(ho, o, no);
        report("v1 naive fwd f32 out", lab_nmse(ho, ro, no), 1e-9);
        run_v2_fwd<float, HD / 32>(o, dl, q, p);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(ho, o, no);
        lab_download(hl, dl, nl);
        report("v2 simple fwd f32 out", lab_nmse(ho, ro, no), 1e-9);
        report("v2 simple fwd f32 lse", lab_nmse(hl, rl, nl), 1e-10);
        run_v2_bwd<float, HD / 32>(dq, gg, q, o, dl, dD, p);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(hd, dq, nq);
        report("v2 simple bwd f32 dqkv", lab_nmse(hd, rd, nq), 1e-8);
        cudaFree(q), cudaFree(gg), cudaFree(o), cudaFree(dq);
    }
    { // bf16
        mt_bf16 *q = lab_upload<mt_bf16>(qkv, nq), *gg = lab_upload<mt_bf16>(g, no), *o, *dq;
        LAB_CHECK(cudaMalloc(&o, no * 2));
        LAB_CHECK(cudaMalloc(&dq, nq * 2));
        run_v2_fwd<mt_bf16, HD / 32>(o, dl, q, p);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(ho, o, no);
        report("v2 simple fwd bf16 out", lab_nmse(ho, ro, no), 1e-4);
        run_v3_fwd<HD>(o, dl, q, p);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(ho, o, no);
        lab_download(hl, dl, nl);
        report("v3 mma fwd bf16 out", lab_nmse(ho, ro, no), 5e-4);
        report("v3 mma fwd bf16 lse", lab_nmse(hl, rl, nl), 1e-6);
        run_v3_bwd<HD>(dq, gg, q, o, dl, dD, p);
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(hd, dq, nq);
        report("v3 mma bwd bf16 dqkv", lab_nmse(hd, rd, nq), 2e-3);
        const void *bufs[] = {q, o, dq, gg};
        if (g_cudnn && !mt_cudnn_attn_unsupported(1, HD, bufs, 4)) {
            LAB_CHECK(cudaMemset(o, 0xff, no * 2));
            if (mt_cudnn_attn_fwd(g_cudnn, o, dl, q, B, T, NH, NKV, HD) != MT_OK) {
                report("v4 cudnn fwd (failed to run)", INFINITY, 0);
                fprintf(stderr, "attention lab: %s\n", mt_last_error());
            } else {
                LAB_CHECK(cudaDeviceSynchronize());
                lab_download(ho, o, no);
                lab_download(hl, dl, nl);
                report("v4 cudnn fwd bf16 out", lab_nmse(ho, ro, no), 5e-4);
                report("v4 cudnn fwd bf16 lse", lab_nmse(hl, rl, nl), 1e-6);
                LAB_CHECK(cudaMemset(dq, 0xff, nq * 2));
                if (mt_cudnn_attn_bwd(g_cudnn, dq, gg, q, o, dl, B, T, NH, NKV, HD) != MT_OK) {
                    report("v4 cudnn bwd (failed to run)", INFINITY, 0);
                    fprintf(stderr, "attention lab: %s\n", mt_last_error());
                } else {
                    LAB_CHECK(cudaDeviceSynchronize());
                    lab_download(hd, dq, nq);
                    report("v4 cudnn bwd bf16 dqkv", lab_nmse(hd, rd, nq), 2e-3);
                }
            }
        }
        cudaFree(q), cudaFree(gg), cudaFree(o), cudaFree(dq);
    }
    cudaFree(dl), cudaFree(dD);
    free(qkv), free(g), free(ro), free(rl), free(rd), free(ho), free(hl), free(hd);
}

template <int HD> static void bench(int B, int T, int NH, int NKV) {
    attn_params p = mkp(B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * p.qkv_stride, no = (size_t)B * T * p.o_stride, nl = (size_t)B * NH * T;
    float *h = (float *)malloc(nq * 4);
    lab_fill(h, nq, 3, -2, 2);
    // causal: T^2/2 (q,k) pairs x HD x 2 (fwd: QK^T and PV) x 2 flops
    double fwd_flop = 2.0 * 2.0 * B * NH * ((double)T * T / 2) * HD, bwd_flop = 2.5 * fwd_flop;
    printf("# bench B=%d T=%d NH=%d NKV=%d HD=%d (causal flops: fwd %.3g, bwd %.3g)\n", B, T, NH, NKV, HD, fwd_flop,
           bwd_flop);
    float *l, *D;
    LAB_CHECK(cudaMalloc(&l, nl * 4));
    LAB_CHECK(cudaMalloc(&D, nl * 4));
    {
        float *q = lab_upload<float>(h, nq), *o, *dq;
        LAB_CHECK(cudaMalloc(&o, no * 4));
        LAB_CHECK(cudaMalloc(&dq, nq * 4));
        float ms = lab_time_ms([&] { run_v2_fwd<float, HD / 32>(o, l, q, p); });
        printf("  v2 simple fwd f32   %9.3f ms  %7.1f TFLOP/s\n", ms, fwd_flop / ms / 1e9);
        ms = lab_time_ms([&] { run_v2_bwd<float, HD / 32>(dq, o, q, o, l, D, p); }, 5);
        printf("  v2 simple bwd f32   %9.3f ms  %7.1f TFLOP/s\n", ms, bwd_flop / ms / 1e9);
        cudaFree(q), cudaFree(o), cudaFree(dq);
    }
    {
        mt_bf16 *q = lab_upload<mt_bf16>(h, nq), *o, *dq;
        LAB_CHECK(cudaMalloc(&o, no * 2));
        LAB_CHECK(cudaMalloc(&dq, nq * 2));
        float ms = lab_time_ms([&] { run_v3_fwd<HD>(o, l, q, p); });
        printf("  v3 mma fwd bf16     %9.3f ms  %7.1f TFLOP/s\n", ms, fwd_flop / ms / 1e9);
        ms = lab_time_ms([&] { run_v3_bwd<HD>(dq, o, q, o, l, D, p); });
        printf("  v3 mma bwd bf16     %9.3f ms  %7.1f TFLOP/s\n", ms, bwd_flop / ms / 1e9);
        if (g_cudnn) {
            ms = lab_time_ms([&] { (void)mt_cudnn_attn_fwd(g_cudnn, o, l, q, B, T, NH, NKV, HD); });
            printf("  v4 cudnn fwd bf16   %9.3f ms  %7.1f TFLOP/s\n", ms, fwd_flop / ms / 1e9);
            ms = lab_time_ms([&] { (void)mt_cudnn_attn_bwd(g_cudnn, dq, o, q, o, l, B, T, NH, NKV, HD); });
            printf("  v4 cudnn bwd bf16   %9.3f ms  %7.1f TFLOP/s\n", ms, bwd_flop / ms / 1e9);
        }
        cudaFree(q), cudaFree(o), cudaFree(dq);
    }
    cudaFree(l), cudaFree(D);
    free(h);
}

// Native (v3) and cuDNN (v4) forward + backward at T = 1k..128k, B = 1: one JSON line per
// implementation and length (median of 3 timed runs at T >= 32k, 10 below, after 2 warm-ups).
template <int HD> static void sweep(int NH, int NKV) {
    printf("# sweep NH=%d NKV=%d HD=%d, B=1, causal; flops: fwd 2*2*NH*(T^2/2)*HD, bwd 2.5x fwd\n", NH, NKV, HD);
    for (int T = 1024; T <= 131072; T *= 2) {
        attn_params p = mkp(1, T, NH, NKV, HD);
        size_t nq = (size_t)T * p.qkv_stride, no = (size_t)T * p.o_stride, nl = (size_t)NH * T;
        mt_bf16 *q, *o, *g, *dq;
        float *l, *D;
        LAB_CHECK(cudaMalloc(&q, nq * 2));
        LAB_CHECK(cudaMalloc(&dq, nq * 2));
        LAB_CHECK(cudaMalloc(&o, no * 2));
        LAB_CHECK(cudaMalloc(&g, no * 2));
        LAB_CHECK(cudaMalloc(&l, nl * 4));
        LAB_CHECK(cudaMalloc(&D, nl * 4));
        lab_fill_dev<mt_bf16>(q, nq, 3, -2, 2);
        lab_fill_dev<mt_bf16>(g, no, 4, -1, 1);
        const int reps = T >= 32768 ? 3 : 10;
        double fwd_flop = 2.0 * 2.0 * NH * ((double)T * T / 2) * HD, bwd_flop = 2.5 * fwd_flop;
        for (int impl = 0; impl < 2; impl++) {
            if (impl == 1 && !g_cudnn) continue;
            mt_status st = MT_OK;
            auto fwd = [&] {
                if (impl == 0) run_v3_fwd<HD>(o, l, q, p);
                else if (st == MT_OK) st = mt_cudnn_attn_fwd(g_cudnn, o, l, q, 1, T, NH, NKV, HD);
            };
            auto bwd = [&] {
                if (impl == 0) run_v3_bwd<HD>(dq, g, q, o, l, D, p);
                else if (st == MT_OK) st = mt_cudnn_attn_bwd(g_cudnn, dq, g, q, o, l, 1, T, NH, NKV, HD);
            };
            float fms = lab_time_ms(fwd, reps), bms = lab_time_ms(bwd, reps);
            if (st != MT_OK) {
                fprintf(stderr, "attention lab: cuDNN at T=%d: %s\n", T, mt_last_error());
                failures++;
                continue;
            }
            const char *name = impl ? "cudnn" : "native";
            printf("{\"bench\":\"attention/%s/fwd_bwd\",\"B\":1,\"T\":%d,\"NH\":%d,\"NKV\":%d,\"HD\":%d,"
                   "\"fwd_ms\":%.4f,\"bwd_ms\":%.4f,\"ms\":%.4f,\"tflops\":%.1f}\n",
                   name, T, NH, NKV, HD, fms, bms, fms + bms, (fwd_flop + bwd_flop) / (fms + bms) / 1e9);
            fflush(stdout);
        }
        cudaFree(q), cudaFree(dq), cudaFree(o), cudaFree(g), cudaFree(l), cudaFree(D);
    }
}

static void open_cudnn(void) {
    if (mt_cudnn_attn_create(0, &g_cudnn) == MT_OK)
        printf("# v4: %s\n", mt_cudnn_attn_describe(g_cudnn));
    else
        printf("# v4 skipped: %s\n", mt_last_error());
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--sweep")) {
        int NH = argc >= 5 ? atoi(argv[2]) : 28, NKV = argc >= 5 ? atoi(argv[3]) : 4, HD = argc >= 5 ? atoi(argv[4]) : 128;
        if ((argc != 2 && argc != 5) || NH <= 0 || NKV <= 0 || NH % NKV || (HD != 64 && HD != 128)) {
            fprintf(stderr, "usage: ./attention --sweep [NH NKV HD]   (HD 64 or 128, NH a multiple of NKV)\n");
            return 2;
        }
        open_cudnn();
        if (HD == 64) sweep<64>(NH, NKV);
        else sweep<128>(NH, NKV);
        mt_cudnn_attn_destroy(g_cudnn);
        LAB_CHECK(cudaGetLastError());
        return failures ? 1 : 0;
    }
    open_cudnn();
    int B = 1, T = 4096, NH = 32, NKV = 8, HD = 128;
    if (argc == 6) B = atoi(argv[1]), T = atoi(argv[2]), NH = atoi(argv[3]), NKV = atoi(argv[4]), HD = atoi(argv[5]);
    if ((HD != 64 && HD != 128) || NH % NKV) {
        fprintf(stderr, "attention lab: HD must be 64 or 128 and NH a multiple of NKV\n");
        return 2;
    }
    check<64>(2, 150, 4, 2);
    check<128>(1, 200, 6, 2);
    check<128>(1, 7, 2, 1);
    check<64>(2, 77, 4, 2);  // GQA, odd T (T % 128 != 0: cuDNN's padding-mask workaround where it applies)
    check<128>(1, 256, 4, 4); // MHA, T a multiple of 128
    if (HD == 64) bench<64>(B, T, NH, NKV);
    else bench<128>(B, T, NH, NKV);
    mt_cudnn_attn_destroy(g_cudnn);
    LAB_CHECK(cudaGetLastError());
    printf("# %s\n", failures ? "SOME CHECKS WRONG" : "all checks ok");
    return failures ? 1 : 0;
}
