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
// Executed FLOPs (recompute included) per second over the dense bf16 peak.
double mt_metric_hfu(double flops_executed, double step_ms, double peak_tflops);
// Decimal GB/s of `bytes` over `ms` (0 when no time was spent).
double mt_metric_gbps(double bytes, double ms);
// busy_ms / step_ms (0 for an empty step).
double mt_metric_busy_frac(double busy_ms, double step_ms);
double mt_metric_days_per_billion_tokens(double tokens_per_s);

#endif
