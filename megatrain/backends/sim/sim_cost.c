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

// ms = bytes / (gpu.kernel_gbps.<k> * 1e6) where measured, at bf16 only (what was measured:
// an f32 kernel moves twice the bytes per element and need not reach the same GB/s);
// else the streaming assumption, bytes / (hbm_gbps * MT_SIM_HBM_EFF * 1e6).
double mt_sim_kernel_ms(const mt_hw_profile *p, mt_dtype act, mt_hw_kernel k, double bytes) {
    double gbps = act == MT_BF16 && k >= 0 && k < MT_HW_KERNELS ? p->kernel_gbps[k] : 0;
    return gbps > 0 ? bytes / (gbps * 1e6) : mt_sim_hbm_ms(p, bytes);
}

// eff = base * W/(W + MT_SIM_GEMM_HALF_MACS) * min(1, min(M,N,K)/MT_SIM_GEMM_FULL_DIM), W = M*N*K;
// base = gpu.gemm_bwd_efficiency for a backward GEMM at bf16 where measured (it was
// calibrated through this same size factor), else gpu.gemm_efficiency.
double mt_sim_gemm_eff(const mt_hw_profile *p, mt_dtype act, int backward, double M, double N, double K) {
    double base =
        backward && act == MT_BF16 && p->gemm_bwd_efficiency > 0 ? p->gemm_bwd_efficiency : p->gemm_efficiency;
    double W = M * N * K;
    if (W <= 0) return base;
    double dmin = min2(M, min2(N, K));
    return base * (W / (W + MT_SIM_GEMM_HALF_MACS)) * min2(1.0, dmin / MT_SIM_GEMM_FULL_DIM);
}

double mt_sim_gemm_ms(const mt_hw_profile *p, mt_dtype act, int backward, double M, double N, double K, double bytes) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    double flops = 2.0 * M * N * K;
    return max2(flops / (peak_flops_per_ms(p, act) * mt_sim_gemm_eff(p, act, backward, M, N, K)),
                mt_sim_hbm_ms(p, bytes));
}

// flops / rate(kernel at B*NH*T^2, else at T), roofline on `bytes` at HBM.
double mt_sim_attention_ms(const mt_hw_profile *p, const char *kernel, mt_dtype act, int backward, int B, int T,
                           int NH, int HD, double bytes) {
    double flops = 2.0 * B * NH * (double)T * T * HD;
    if (backward) flops *= MT_ATTN_BWD_FACTOR;
    double rate = mt_hw_attention_tflops(p, kernel, act == MT_BF16, B, NH, T, NULL) * 1e9; // FLOP/ms
    return max2(flops / rate, mt_sim_hbm_ms(p, bytes));
}

double mt_sim_link_ms(const mt_hw_profile *p, mt_copy_kind dir, int pinned, double bytes) {
    double gbps = dir == MT_COPY_H2D ? (pinned ? p->h2d_gbps : p->h2d_pageable_gbps)
                                     : (pinned ? p->d2h_gbps : p->d2h_pageable_gbps);
    return bytes / (gbps * 1e6);
}

// Bytes of host memory a host pass reads and writes (the demand it puts on the shared memory).
double mt_sim_host_work_bytes(const mt_hw_profile *p, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master) {
    double one_read = (double)n * (double)mt_dtype_size(wdt);
    if (kind == MT_HOST_GRAD_ACCUMULATE) return 4.0 * one_read; // 3 accumulate passes + the sum of squares
    if (kind == MT_HOST_GRAD_SUMSQ) return one_read;
    if (kind == MT_HOST_ROWS_GATHER) return 2.0 * one_read;
    int mode = wdt == MT_F32 ? MT_ADAMW_FP32 : master ? MT_ADAMW_MIXED : MT_ADAMW_PAPER;
    double bpp = p->adamw_bytes_per_param[mode] > 0 ? p->adamw_bytes_per_param[mode]
                 : mode == MT_ADAMW_PAPER          ? MT_SIM_ADAMW_PAPER_BYTES
                                                   : MT_SIM_ADAMW_WIDE_BYTES;
    return (double)n * bpp;
}

// host.shared_gbps where the profile states it; else the highest host memory rate it
// measured: no stream reached more, and AdamW alone saturates it (its pass is memory-bound).
double mt_sim_host_shared_gbps(const mt_hw_profile *p) {
    if (p->host_shared_gbps > 0) return p->host_shared_gbps;
    double g = p->host_mem_gbps;
    for (int m = 0; m < 3; m++) {
        double bpp = p->adamw_bytes_per_param[m] > 0 ? p->adamw_bytes_per_param[m]
                     : m == MT_ADAMW_PAPER          ? MT_SIM_ADAMW_PAPER_BYTES
                                                    : MT_SIM_ADAMW_WIDE_BYTES;
        g = max2(g, p->adamw_params_per_s[m] * bpp / 1e9);
    }
    return g;
}

// Proportional share: when a copy running at `copy_gbps` and host passes demanding
// `host_gbps` ask for more than the shared bandwidth, the copy gets its demand scaled
// by shared / total (the passes keep their measured rates: sim.h, "host memory").
double mt_sim_copy_share(const mt_hw_profile *p, double copy_gbps, double host_gbps) {
    double shared = mt_sim_host_shared_gbps(p), total = copy_gbps + host_gbps;
    return host_gbps > 0 && total > shared ? shared / total : 1.0;
}

double mt_sim_host_work_ms(const mt_hw_profile *p, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master) {
    // the sum of squares: one read of the gradients, at its measured rate where the profile has one
    double sumsq_gbps = p->grad_sumsq_gbps > 0 ? p->grad_sumsq_gbps : p->host_mem_gbps;
    double one_read = (double)n * (double)mt_dtype_size(wdt);
    if (kind == MT_HOST_GRAD_ACCUMULATE) // read dst, read slab, write dst, then the sum-of-squares pass over dst
        return 3.0 * one_read / (p->host_mem_gbps * 1e6) + one_read / (sumsq_gbps * 1e6);
    if (kind == MT_HOST_GRAD_SUMSQ) return one_read / (sumsq_gbps * 1e6);
    if (kind == MT_HOST_ROWS_GATHER) // one read, one write
        return 2.0 * (double)n * (double)mt_dtype_size(wdt) / (p->host_mem_gbps * 1e6);
    double rate = wdt == MT_F32 ? p->adamw_params_per_s[MT_ADAMW_FP32]
                  : master      ? p->adamw_params_per_s[MT_ADAMW_MIXED]
                                : p->adamw_params_per_s[MT_ADAMW_PAPER];
    return (double)n / rate * 1e3;
}
