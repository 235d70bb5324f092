// metrics.h: the one definition of each reported metric (METRICS.md beside
// this file says what each one means; harness/metrics.py is the same
// arithmetic for the Python side, checked digit for digit).
#ifndef MT_METRICS_H
#define MT_METRICS_H

double mt_metric_tokens_per_s(double tokens, double step_ms);
// 6 * N_all * tokens / step time, in TFLOP/s (docs/DESIGN.md#metrics, the official code's).
double mt_metric_tflops(double params, double tokens, double step_ms);
// tflops over the device's dense bf16 peak.
double mt_metric_mfu(double tflops, double peak_tflops);
// The parameters whose FLOPs a token costs: all but the input embedding (a tied matrix is
// the head, kept).
double mt_metric_params_model(double params, double vocab, double hidden, int tied);
// Model FLOPs per token, attention included, causal: 6 * N_model + 6 * L * NH * HD * T
// (PaLM's 12 * L * H * Q * T halved by the causal mask; METRICS.md).
double mt_metric_model_flops_per_token(double params_model, double layers, double heads, double head_dim,
                                       double seq_len);
// model FLOPs per token * tokens / step time, in TFLOP/s (model_mfu: over the dense bf16 peak).
double mt_metric_model_tflops(double flops_per_token, double tokens, double step_ms);
// Executed FLOPs (recompute included) per second over the dense bf16 peak.
double mt_metric_hfu(double flops_executed, double step_ms, double peak_tflops);
// Decimal GB/s of `bytes` over `ms` (0 when no time was spent).
double mt_metric_gbps(double bytes, double ms);
// busy_ms / step_ms (0 for an empty step).
double mt_metric_busy_frac(double busy_ms, double step_ms);
double mt_metric_days_per_billion_tokens(double tokens_per_s);

#endif
