// sim_cost.c: the cost model (see sim.h for the formulas and where each
// constant comes from). Pure functions of the profile and the op's shape:
// the simulated time of a run depends on nothing else.
#include "backends/sim/sim.h"

static double max2(double a, double b) { return a > b ? a : b; }
static double min2(double a, double b) { return a < b ? a : b; }

// Dense peak in FLOP per millisecond for the compute precision.
static double peak_flops_per_ms(const mt_hw_profile *p, mt_dtype act) {
    return (act == MT_BF16 ? p->peak_tflops[MT_PEAK_BF16] : p->peak_tflops[MT_PEAK_FP32]) * 1e9;
}

double mt_sim_hbm_ms(const mt_hw_profile *p, double bytes) { return bytes / (p->hbm_gbps * MT_SIM_HBM_EFF * 1e6); }

double mt_sim_gemm_eff(const mt_hw_profile *p, double M, double N, double K) {
    double W = M * N * K;
    if (W <= 0) return p->gemm_efficiency;
    double dmin = min2(M, min2(N, K));
    return p->gemm_efficiency * (W / (W + MT_SIM_GEMM_HALF_MACS)) * min2(1.0, dmin / MT_SIM_GEMM_FULL_DIM);
}

double mt_sim_gemm_ms(const mt_hw_profile *p, mt_dtype act, double M, double N, double K, double bytes) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    double flops = 2.0 * M * N * K;
    return max2(flops / (peak_flops_per_ms(p, act) * mt_sim_gemm_eff(p, M, N, K)), mt_sim_hbm_ms(p, bytes));
}

double mt_sim_attention_ms(const mt_hw_profile *p, const char *kernel, mt_dtype act, int backward, int B, int T,
                           int NH, int HD, double bytes) {
    double flops = 2.0 * B * NH * (double)T * T * HD;
    if (backward) flops *= MT_ATTN_BWD_FACTOR;
    double rate = mt_hw_attention_tflops(p, kernel, act == MT_BF16, T, NULL) * 1e9; // FLOP/ms
    return max2(flops / rate, mt_sim_hbm_ms(p, bytes));
}

double mt_sim_link_ms(const mt_hw_profile *p, mt_copy_kind dir, int pinned, double bytes) {
    double gbps = dir == MT_COPY_H2D ? (pinned ? p->h2d_gbps : p->h2d_pageable_gbps)
                                     : (pinned ? p->d2h_gbps : p->d2h_pageable_gbps);
    return bytes / (gbps * 1e6);
}

double mt_sim_host_work_ms(const mt_hw_profile *p, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master) {
    if (kind == MT_HOST_GRAD_ACCUMULATE) {
        // read dst, read slab, write dst, then the sum-of-squares pass over dst
        double bytes = (double)n * 4.0 * (double)mt_dtype_size(wdt);
        return bytes / (p->host_mem_gbps * 1e6);
    }
    if (kind == MT_HOST_GRAD_SUMSQ) // one read of the gradients
        return (double)n * (double)mt_dtype_size(wdt) / (p->host_mem_gbps * 1e6);
    if (kind == MT_HOST_ROWS_GATHER) // one read, one write
        return 2.0 * (double)n * (double)mt_dtype_size(wdt) / (p->host_mem_gbps * 1e6);
    double rate = wdt == MT_F32 ? p->adamw_params_per_s[MT_ADAMW_FP32]
                  : master      ? p->adamw_params_per_s[MT_ADAMW_MIXED]
                                : p->adamw_params_per_s[MT_ADAMW_PAPER];
    return (double)n / rate * 1e3;
}
