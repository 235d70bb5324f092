// metrics.c: the arithmetic of METRICS.md, in the order written there (the
// order matters: the sim's golden figures are pinned to the last digit).
#include "core/metrics.h"

double mt_metric_tokens_per_s(double tokens, double step_ms) { return tokens / (step_ms / 1e3); }

double mt_metric_tflops(double params, double tokens, double step_ms) {
    return 6.0 * params * tokens / (step_ms / 1e3) / 1e12;
}

double mt_metric_mfu(double tflops, double peak_tflops) { return tflops / peak_tflops; }

double mt_metric_params_model(double params, double vocab, double hidden, int tied) {
    return tied ? params : params - vocab * hidden;
}

double mt_metric_model_flops_per_token(double params_model, double layers, double heads, double head_dim,
                                       double seq_len) {
    return 6.0 * params_model + 6.0 * layers * heads * head_dim * seq_len;
}

double mt_metric_model_tflops(double flops_per_token, double tokens, double step_ms) {
    return flops_per_token * tokens / (step_ms / 1e3) / 1e12;
}

double mt_metric_hfu(double flops_executed, double step_ms, double peak_tflops) {
    return flops_executed / (step_ms / 1e3) / 1e12 / peak_tflops;
}

double mt_metric_gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0; }

double mt_metric_busy_frac(double busy_ms, double step_ms) { return step_ms > 0 ? busy_ms / step_ms : 0; }

double mt_metric_days_per_billion_tokens(double tokens_per_s) { return 1e9 / tokens_per_s / 86400.0; }
