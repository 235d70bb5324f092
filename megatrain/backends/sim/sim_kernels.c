// sim_kernels.c: the layer kernels under simulation. Each one prices its op on
// the compute stream (GEMMs and attention by FLOPs, the rest by the bytes it
// reads and writes at the kernel's measured rate or HBM bandwidth; sim.h) and
// returns: no data is touched. harness/microbench/kernels.c repeats these byte
// counts (its sim_gbps counter), so that a measured rate prices them.
// Byte counts assume one fused pass per kernel unless noted.
#include "backends/sim/sim_internal.h"

static mt_status price(mt_backend *be, const char *name, double ms, double amount, int unit) {
    mt_sim_ctx *c = mt_sim_ctx_of(be);
    pthread_mutex_lock(&c->mu);
    mt_sim_enqueue_locked(c, MT_STREAM_COMPUTE, name, ms, amount, unit);
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

// A memory-bound kernel: its bytes at its measured rate, else at the HBM assumption (sim.h).
static mt_status price_bytes(mt_backend *be, mt_hw_kernel k, double bytes) {
    return price(be, mt_hw_kernel_name(k), mt_sim_kernel_ms(&mt_sim_ctx_of(be)->prof, be->act_dtype, k, bytes), bytes,
                 MT_SIM_BYTES);
}

static double as_of(mt_backend *be) { return (double)mt_dtype_size(be->act_dtype); }

mt_status mt_sim_op_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N,
                                  int C) {
    (void)out, (void)ids, (void)wte;
    // gather N rows of wte, write N rows of activations, read the ids
    return price_bytes(be, MT_HW_K_EMBEDDING_FWD, (double)N * C * ((double)mt_dtype_size(wdt) + as_of(be)) + 4.0 * N);
}

mt_status mt_sim_op_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout,
                                  int N, int C) {
    (void)dwte, (void)ids, (void)dout;
    // read dout, read-modify-write N rows of dwte (scatter-add)
    return price_bytes(be, MT_HW_K_EMBEDDING_BWD, (double)N * C * (as_of(be) + 2.0 * mt_dtype_size(wdt)) + 4.0 * N);
}

mt_status mt_sim_op_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias,
                               mt_dtype wdt, int N, int IC, int OC) {
    (void)out, (void)inp, (void)w;
    const mt_hw_profile *p = &mt_sim_ctx_of(be)->prof;
    double as = as_of(be), ws = (double)mt_dtype_size(wdt);
    double bytes = (double)N * IC * as + (double)OC * IC * ws + (double)N * OC * as + (bias ? OC * ws : 0);
    return price(be, "matmul_fwd", mt_sim_gemm_ms(p, be->act_dtype, 0, N, OC, IC, bytes), 2.0 * N * IC * OC,
                 MT_SIM_FLOPS);
}

mt_status mt_sim_op_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                               const void *w, mt_dtype wdt, int N, int IC, int OC, int flags) {
    (void)dout, (void)inp, (void)w;
    const mt_hw_profile *p = &mt_sim_ctx_of(be)->prof;
    double as = as_of(be), ws = (double)mt_dtype_size(wdt);
    double ms = 0, flops = 0;
    if (dinp) { // dinp(N,IC) = dout(N,OC) @ w(OC,IC)
        double bytes = (double)N * OC * as + (double)OC * IC * ws + (double)N * IC * as * (flags & MT_ACC_DINP ? 2 : 1);
        ms += mt_sim_gemm_ms(p, be->act_dtype, 1, N, IC, OC, bytes);
        flops += 2.0 * N * IC * OC;
    }
    if (dw) { // dw(OC,IC) = dout^T(OC,N) @ inp(N,IC); dbias folded into the same pass over dout.
              // Under MT_DW_F32 dw is read (to accumulate) and written as f32: twice the bytes of bf16.
        double dws = (flags & MT_DW_F32) ? 4.0 : ws;
        double bytes = (double)N * OC * as + (double)N * IC * as + (double)OC * IC * dws * (flags & MT_ACC_DW ? 2 : 1) +
                       (dbias ? OC * dws : 0);
        ms += mt_sim_gemm_ms(p, be->act_dtype, 1, OC, IC, N, bytes);
        flops += 2.0 * N * IC * OC;
    }
    return price(be, "matmul_bwd", ms, flops, MT_SIM_FLOPS);
}

mt_status mt_sim_op_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt,
                                int R, int D, float eps) {
    (void)out, (void)rstd, (void)inp, (void)w, (void)eps;
    return price_bytes(be, MT_HW_K_RMSNORM_FWD, 2.0 * R * D * as_of(be) + (double)D * mt_dtype_size(wdt) + 4.0 * R);
}

mt_status mt_sim_op_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                                const float *rstd, mt_dtype wdt, int R, int D) {
    (void)dinp, (void)dw, (void)dout, (void)inp, (void)w, (void)rstd;
    // read dout and inp, write dinp; dw reduced over rows (the cuda backend reads dout and inp
    // again for dw, cuda_norm.cu: a measured gpu.kernel_gbps prices that within this count)
    return price_bytes(be, MT_HW_K_RMSNORM_BWD, 3.0 * R * D * as_of(be) + 2.0 * D * mt_dtype_size(wdt) + 4.0 * R);
}

mt_status mt_sim_op_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                    const void *w, mt_dtype wdt, int R, int D, float eps) {
    (void)sum, (void)out, (void)rstd, (void)a, (void)b, (void)w, (void)eps;
    // read a and b, write sum and out (the second read of sum hits the cache)
    return price_bytes(be, MT_HW_K_ADD_RMSNORM_FWD, 4.0 * R * D * as_of(be) + (double)D * mt_dtype_size(wdt) + 4.0 * R);
}

mt_status mt_sim_op_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                    const void *w, const float *rstd, mt_dtype wdt, int R, int D) {
    (void)dacc, (void)dw, (void)dout, (void)inp, (void)w, (void)rstd;
    // read dout and inp, read-modify-write dacc; dw reduced over rows (a second pass on cuda, as above)
    return price_bytes(be, MT_HW_K_RMSNORM_BWD_ADD, 4.0 * R * D * as_of(be) + 2.0 * D * mt_dtype_size(wdt) + 4.0 * R);
}

mt_status mt_sim_op_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw,
                                const void *kw, mt_dtype wdt, int N, int NH, int NKV, int HD, float eps) {
    (void)out, (void)rstd, (void)inp, (void)qw, (void)kw, (void)eps;
    double row = (double)(NH + 2 * NKV) * HD;
    return price_bytes(be, MT_HW_K_QK_NORM_FWD, 2.0 * N * row * as_of(be) + 2.0 * HD * mt_dtype_size(wdt) +
                                              4.0 * N * (NH + NKV));
}

mt_status mt_sim_op_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                                const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH,
                                int NKV, int HD) {
    (void)dinp, (void)dqw, (void)dkw, (void)dout, (void)inp, (void)qw, (void)kw, (void)rstd;
    double row = (double)(NH + 2 * NKV) * HD;
    return price_bytes(be, MT_HW_K_QK_NORM_BWD, 3.0 * N * row * as_of(be) + 4.0 * HD * mt_dtype_size(wdt) +
                                              4.0 * N * (NH + NKV));
}

static double rope_bytes(mt_backend *be, int B, int T, int NH, int NKV, int HD) {
    // read + write the packed qkv rows (v is copied through), read the cos/sin tables
    return 2.0 * B * T * (double)(NH + 2 * NKV) * HD * as_of(be) + 2.0 * T * (HD / 2) * 4.0;
}

mt_status mt_sim_op_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD) {
    (void)out, (void)inp, (void)cos, (void)sin;
    return price_bytes(be, MT_HW_K_ROPE_FWD, rope_bytes(be, B, T, NH, NKV, HD));
}

mt_status mt_sim_op_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD) {
    (void)dinp, (void)dout, (void)cos, (void)sin;
    return price_bytes(be, MT_HW_K_ROPE_BWD, rope_bytes(be, B, T, NH, NKV, HD));
}

mt_status mt_sim_op_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH,
                                  int NKV, int HD) {
    (void)out, (void)lse, (void)qkv;
    const mt_hw_profile *p = &mt_sim_ctx_of(be)->prof;
    double N = (double)B * T;
    double bytes = N * (NH + 2 * NKV) * HD * as_of(be) + N * NH * HD * as_of(be) + 4.0 * N * NH;
    double flops = 2.0 * B * NH * (double)T * T * HD;
    return price(be, "attention_fwd",
                 mt_sim_attention_ms(p, mt_sim_ctx_of(be)->attn_kernel, be->act_dtype, 0, B, T, NH, HD, bytes), flops,
                 MT_SIM_FLOPS);
}

mt_status mt_sim_op_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                  const float *lse, int B, int T, int NH, int NKV, int HD) {
    (void)dqkv, (void)dout, (void)qkv, (void)out, (void)lse;
    const mt_hw_profile *p = &mt_sim_ctx_of(be)->prof;
    double N = (double)B * T;
    // read qkv, out, dout, lse; write dqkv
    double bytes = 2.0 * N * (NH + 2 * NKV) * HD * as_of(be) + 2.0 * N * NH * HD * as_of(be) + 4.0 * N * NH;
    double flops = MT_ATTN_BWD_FACTOR * 2.0 * B * NH * (double)T * T * HD;
    return price(be, "attention_bwd",
                 mt_sim_attention_ms(p, mt_sim_ctx_of(be)->attn_kernel, be->act_dtype, 1, B, T, NH, HD, bytes), flops,
                 MT_SIM_FLOPS);
}

mt_status mt_sim_op_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F) {
    (void)h, (void)gu;
    return price_bytes(be, MT_HW_K_SWIGLU_FWD, 3.0 * N * (double)F * as_of(be)); // read gate, up; write h
}

mt_status mt_sim_op_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F) {
    (void)dgu, (void)dh, (void)gu;
    return price_bytes(be, MT_HW_K_SWIGLU_BWD, 5.0 * N * (double)F * as_of(be)); // read dh, gate, up; write dgate, dup
}

mt_status mt_sim_op_add(mt_backend *be, void *out, const void *a, const void *b, size_t n) {
    (void)out, (void)a, (void)b;
    return price_bytes(be, MT_HW_K_ADD, 3.0 * (double)n * as_of(be));
}

mt_status mt_sim_op_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                                 float dscale) {
    (void)logits, (void)losses, (void)targets, (void)dscale;
    // two passes: read the row for its logsumexp, then read and overwrite it with the gradient
    return price_bytes(be, MT_HW_K_XENT_FWD_BWD, 3.0 * n * (double)V * as_of(be) + 8.0 * n);
}

mt_status mt_sim_op_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    (void)dst, (void)src;
    return price_bytes(be, MT_HW_K_CAST, (double)n * (double)(mt_dtype_size(dt) + mt_dtype_size(st)));
}
