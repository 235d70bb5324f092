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
#include "model/hardware_profile.h"

// ---------------------------------------------------------------------------
// Hardware profiles: mt_hw_profile and its loader are model/hardware_profile.h;
// the planner adds "measured" (measured_profile.c).

// `spec` is "measured", a path (contains '/' or ends in .json) or a profile name
// looked up in the profile directory; an unknown name lists the available ones.
mt_status mt_hw_profile_resolve(const char *spec, mt_hw_profile *out);
// A profile for this machine: host memory and cores read from /proc and sysconf,
// GPU memory from the CUDA backend when one is visible; every rate is taken from
// a base profile (h100-128g, or h200-128g for an H200) and labelled assumed.
mt_status mt_hw_profile_measured(mt_hw_profile *out);

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
    mt_grad_sum grad_sum;  // chunked weight gradients summed in f32 or bf16 (AUTO: f32 where it fits)
    int offload_checkpoints; // 1 on, 0 off, -1 auto (offload when the device plan exceeds gpu_free_bytes)
    size_t gpu_free_bytes;   // for auto: the device memory available (0 = unknown: keep on the device)
    int copy_bind;           // --bind copy: the engine adds one layer-sized template buffer on the device
    mt_zero3_knobs zero3;  // DeepSpeed's knobs for zero3 (mt_zero3_defaults: DeepSpeed's defaults)
} mt_plan_input;

typedef struct {
    size_t host_bytes, pinned_bytes, gpu_bytes;
    size_t host_state_bytes;    // params, grads, moments, master (what scales with N)
    size_t engine_host_bytes;   // zero3: what our engine's zero3 schedule allocates (else = host_bytes)
    size_t host_staging_bytes;  // slabs, token staging, other buffers
    size_t gpu_weights_bytes, gpu_grads_bytes, gpu_checkpoint_bytes, gpu_activation_bytes;
    size_t checkpoint_host_bytes; // offloaded layer checkpoints (in host and pinned bytes)
    size_t deepspeed_gpu_bytes;   // zero3: DeepSpeed's own GPU footprint model (gpu_bytes is our schedule's)
    int offload_checkpoints;      // resolved: checkpoints live in host memory
    int grad_sum_f32;             // resolved: chunked weight gradients summed in f32 (one rounding)
    size_t gpu_grad_sum_bytes;    // its f32 buffer (part of gpu_grads_bytes)
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
