// hardware_rates.h: the loader's part that reads a profile's optional measured GPU rates
// (hardware_rates.c): the attention tables, the backward GEMM efficiency and the
// memory-bound kernels' bandwidths. Internal to model/: callers use hardware_profile.h.
#ifndef MT_HARDWARE_RATES_H
#define MT_HARDWARE_RATES_H

#include <cjson/cJSON.h>

#include "model/hardware_profile.h"

// Reads gpu.attention_tflops, gpu.attention_work_tflops, gpu.gemm_bwd_efficiency and
// gpu.kernel_gbps of `root` into p; each present figure must have its sources entry.
mt_status mt_hw_parse_rates(const char *path, const cJSON *root, mt_hw_profile *p);

#endif
