// planner.h: `megatrain plan`: what a configuration needs in host, pinned and
// GPU memory under each schedule, whether it fits a machine described by a
// hardware profile (experiments/hardware/NAME.json, schema megatrain.hardware/1),
// and an analytic prediction of its step time. The megatrain and resident
// memory figures come from the engine's own accounting (mt_engine_memory_plan),
// so a plan and a run agree; zero3 and naive have their own models here.
#ifndef MT_PLANNER_H
#define MT_PLANNER_H

#include <stddef.h>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/host_state.h"
#include "model/config.h"

// ---------------------------------------------------------------------------
// Hardware profiles (hardware_profile.c)

typedef struct {
    char name[64];
    char source[1100];     // the file read, or "measured"
    char description[256];
    char gpu_name[128];
    double peak_tflops[3]; // dense peak by compute precision: [0] bf16, [1] tf32, [2] fp32
    double gemm_efficiency;
    double hbm_gbps, hbm_bytes;
    double h2d_gbps, d2h_gbps;                   // pinned, one direction alone
    double h2d_pageable_gbps, d2h_pageable_gbps;
    double duplex_factor;                        // each direction's share of its solo rate under duplex
    double host_mem_bytes, host_mem_gbps;
    int cpu_cores, numa_nodes;
    double adamw_params_per_s[3];                // indexed by mt_precision (paper, mixed, fp32)
    double pinned_limit_bytes;                   // page-lock limit below host memory (ulimit -l), 0 = none
    int measured;                                // built from this machine
    char measured_note[512];                     // what was read and what was assumed
} mt_hw_profile;

enum { MT_PEAK_BF16 = 0, MT_PEAK_TF32 = 1, MT_PEAK_FP32 = 2 };

// Reads and validates a profile file; errors name the file and the key:
//   "x.json: link.h2d_gbps.pinned: required number is missing".
mt_status mt_hw_profile_load(const char *path, mt_hw_profile *out);
// `spec` is "measured", a path (contains '/' or ends in .json) or a profile name
// looked up in the profile directory; an unknown name lists the available ones.
mt_status mt_hw_profile_resolve(const char *spec, mt_hw_profile *out);
// A profile for this machine: host memory and cores read from /proc and sysconf,
// GPU memory from the CUDA backend when one is visible; every rate is taken from
// a base profile (h100-128g, or h200-128g for an H200) and labelled assumed.
mt_status mt_hw_profile_measured(mt_hw_profile *out);
// The directory searched for NAME.json: $MT_HARDWARE_DIR, ./experiments/hardware,
// then <exe>/../../experiments/hardware. NULL when none exists.
const char *mt_hw_profile_dir(void);
// Comma-separated names of the profiles in the directory (empty when none).
void mt_hw_profile_list(char *buf, size_t cap);

// ---------------------------------------------------------------------------
// Memory (plan.c, zero3_memory.c)

// Schedules are the engine's (mt_schedule, mt_schedule_parse).
typedef struct {
    mt_schedule schedule;
    mt_precision prec;
    int B, T, grad_accum;  // micro-batch rows, sequence length, micro-batches per step
    int ckpt_interval;     // K (megatrain, naive)
    int weight_bufs;       // device weight buffers (megatrain: 2 or 3; naive uses 1)
    int grad_slabs;        // pinned gradient slabs
    int mlp_rows;          // tokens per MLP chunk (0 = all)
    mt_zero3_knobs zero3;  // DeepSpeed's knobs for zero3 (mt_zero3_defaults: DeepSpeed's defaults)
} mt_plan_input;

typedef struct {
    size_t host_bytes, pinned_bytes, gpu_bytes;
    size_t host_state_bytes;    // params, grads, moments, master (what scales with N)
    size_t engine_host_bytes;   // zero3: what our engine's zero3 schedule allocates (else = host_bytes)
    size_t host_staging_bytes;  // slabs, token staging, other buffers
    size_t gpu_weights_bytes, gpu_grads_bytes, gpu_checkpoint_bytes, gpu_activation_bytes;
    double host_bytes_per_param; // host_state_bytes / params
    const char *host_accounting; // one line: where the bytes per param come from
} mt_plan_memory;

// Checks the input against the model (one stderr-ready line on error).
mt_status mt_plan_input_validate(const mt_config *c, const mt_plan_input *in);
// Memory of the configuration under in->schedule.
mt_status mt_plan_memory_compute(const mt_config *c, const mt_plan_input *in, mt_plan_memory *out);
// The zero3 part (zero3_memory.c).
void mt_zero3_memory(const mt_config *c, const mt_plan_input *in, mt_plan_memory *out);
// Bytes per parameter DeepSpeed ZeRO-3 offload keeps on the host: 18 (bf16), 16 (fp32).
int mt_zero3_host_bytes_per_param(mt_precision p);

// ---------------------------------------------------------------------------
// Feasibility (plan.c)

#define MT_PLAN_HOST_RESERVE 0.05         // fraction of host memory left to the OS and other processes
#define MT_PLAN_GPU_RESERVE_BYTES (1ULL << 30) // CUDA context, cuBLAS workspace, allocator slack

typedef struct {
    const char *resource; // "host", "pinned", "gpu"
    double need_bytes, have_bytes;
} mt_plan_short;

typedef struct {
    int fits;
    double host_have_bytes, pinned_have_bytes, gpu_have_bytes;
    int n_short;
    mt_plan_short shortfall[3];
} mt_plan_fit;

void mt_plan_check_fit(const mt_plan_memory *m, const mt_hw_profile *hw, mt_plan_fit *out);

// ---------------------------------------------------------------------------
// Speed (predict.c): the analytic model "analytic-v1". A simulator backend may
// replace it behind the same function.

typedef struct {
    const char *model;          // "analytic-v1"
    long long tokens;           // per step: B * T * grad_accum
    double flops_6n;            // 6 * N_all * tokens (the reported metric's numerator)
    double flops_executed;      // GEMM + attention + recompute FLOPs the GPU runs
    double compute_ms;          // flops_executed at peak x gemm_efficiency
    double h2d_ms, d2h_ms;      // link busy time per step (at the rates used)
    double optimizer_ms;        // host AdamW over all parameters
    double exposed_ms;          // step_ms - compute_ms: step time the GPU does not compute
    double step_ms, tokens_per_s, tflops, mfu, hfu, days_per_billion_tokens;
    double h2d_bytes, d2h_bytes;
    const char *bound;          // "compute", "h2d", "d2h" or "optimizer": the resource that set most of the step
    const char *formula;        // the step formula of this schedule, in words
} mt_plan_prediction;

mt_status mt_plan_predict(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, mt_plan_prediction *out);

#endif
