// planner.h: `megatrain plan`: what a configuration needs in host, pinned and
// GPU memory under each schedule, whether it fits a machine described by a
// hardware profile (experiments/hardware/NAME.json, schema megatrain.hardware/1),
// and an analytic prediction of its step time. Memory is the engine's own
// footprint (mt_engine_footprint_of: the sum of what its parts allocate), so a
// plan and a run agree; a schedule that states the real system's host bytes per
// parameter (zero3) reports that system's host side beside it.
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
// This machine's GPU as CUDA sees it: name and memory ("" and 0 when none is visible).
void mt_this_machine_gpu(char *name, size_t cap, double *mem_bytes);

// ---------------------------------------------------------------------------
// Memory (plan.c, zero3_memory.c)

// The engine's options (schedule, batch, K, buffers, slabs, ...) plus what only
// the planner needs.
typedef struct {
    mt_engine_opts eng;
    mt_precision prec;
    size_t gpu_free_bytes;   // for --offload-checkpoints auto: the device memory available (0 = unknown: keep on the device)
    double rollback_rate;    // speculative step: the fraction of steps that roll back (--rollback-rate, 0 by default)
    mt_attn_impl attention;  // --attention (a peer's descriptor names its own implementation instead)
    unsigned backend_caps;   // --backend named whose "device" is host memory (cpu): its caps, for its f32
                             // activations and kernel scratch; 0: what the configuration needs on a GPU
    // One data-parallel rank of several (planner/ranks.c sets these; 0 for one GPU): the share of
    // each gradient this rank copies to the host (1/N after a reduce-scatter; 0 means 1), and the
    // time its gradient collective takes per micro-batch (ms; on a stream of its own, as cuda_nccl.cu runs NCCL).
    double rank_grad_share, rank_reduce_ms;
    // Optimizer state sharded across hosts: the share of the update this host runs (0 means 1),
    // and the all-gather of the updated parameters it runs with it (ms a step; the worker's).
    double rank_opt_share, rank_opt_extra_ms;
} mt_plan_input;

typedef struct {
    mt_engine_footprint engine;   // what our engine allocates for this configuration, part by part
    // What the plan reports: the engine's sums, or, for a schedule that states the
    // real system's host bytes per parameter (zero3: DeepSpeed's), that system's host side.
    size_t host_bytes, pinned_bytes, gpu_bytes;
    size_t host_state_bytes;      // params, grads, moments, master (what scales with N)
    size_t host_staging_bytes;    // slabs, token staging, other buffers
    size_t host_spare_bytes;      // the speculative step's spare state blocks (its window's units)
    size_t deepspeed_gpu_bytes;   // zero3: DeepSpeed's own GPU footprint model (gpu_bytes is our schedule's)
    size_t devopt_gpu_bytes;      // the split's units on the GPU (--device-optimizer; in gpu_bytes)
    double host_bytes_per_param;  // host_state_bytes / params
    int device_in_host;           // plan --backend cpu: the copies of gpu_bytes in host memory (1, --gpus N: N;
                                  // the fit adds them); 0 on a GPU
    const char *host_accounting;  // one line: where the bytes per param come from
} mt_plan_memory;

// Checks the input against the model (one stderr-ready line on error).
mt_status mt_plan_input_validate(const mt_config *c, const mt_plan_input *in);
// Memory of the configuration under in->schedule.
mt_status mt_plan_memory_compute(const mt_config *c, const mt_plan_input *in, mt_plan_memory *out);
// DeepSpeed ZeRO-3 offload's own accounting (zero3_memory.c), for a schedule that
// states host bytes per parameter (mt_schedule_desc.host_bytes_per_param) and takes the ZeRO-3 knobs.
void mt_zero3_memory(const mt_config *c, const mt_plan_input *in, mt_plan_memory *out);

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
    mt_plan_short shortfall[4]; // host, pinned, gpu; and "mpi_unit" for a plan across hosts (cmd_plan.c)
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
    // The speculative step (0 units: off): the window, its spare blocks, the step
    // when nothing rolls back and what one rollback adds to a step.
    int spec_units;
    double spare_bytes, step_ms_no_rollback, rollback_cost_ms;
    // Attention as priced: the implementation (a profile's gpu.attention_tflops name), its
    // rate at the run's T, where that rate comes from, and the GPU time it takes per step.
    const char *attention_kernel, *attention_source;
    double attention_tflops, attention_ms;
    // The split (--device-optimizer, engine/device_optimizer.h), priced in the streamed form:
    // its units, their parameters and device bytes, the device AdamW's time at the HBM rate, and
    // the step with the split off; with the split off, what auto would choose and give.
    int devopt_units, devopt_auto_units;
    double devopt_params, devopt_gpu_bytes, devopt_adamw_ms, step_ms_split_off;
    double devopt_auto_gpu_bytes, devopt_auto_step_ms;
} mt_plan_prediction;

mt_status mt_plan_predict(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, mt_plan_prediction *out);
// device_optimizer_plan.c: the units the engine's split takes under the plan's GPU memory
// (want: --device-optimizer; on[L+2] set), their device bytes; and the device AdamW's time.
int mt_plan_devopt(const mt_config *c, const mt_plan_input *in, int want, unsigned char *on, size_t *bytes);
double mt_plan_devopt_adamw_ms(const mt_hw_profile *hw, mt_precision p, double params);

// ---------------------------------------------------------------------------
// Several GPUs and hosts (ranks.c): `plan --gpus N --hosts H`, one rank priced by
// mt_plan_predict (its batch, its share of the links, its collective), the host memory the
// ranks share as a floor, the hosts' gradient sum after it. The closed form's, not the sim's.

typedef struct {
    int gpus, hosts, rank_batch, gpus_per_uplink, host_add;
    double h2d_gbps, d2h_gbps;          // one rank's copy rates as priced
    const char *link_limit;             // which set them
    double collective_gbps;             // ours: the reduce-scatter's rate (0: none)
    const char *collective_link;        // "nvlink", "collective_gbps" or "pcie"
    double reduce_bytes_per_gpu, reduce_ms, d2h_bytes_per_gpu; // per step
    double host_add_bytes;              // the official code's locked host adds, per step
    double host_traffic_bytes, host_floor_ms; // one host's memory traffic per step, and its time at mem_gbps
    double link_bytes_per_host, hosts_mem_bytes, hosts_ms; // per host and step: NIC bytes each way, memory bytes, time
    int grads_sliced; // one GPU per host: the gradients' sum sliced too, summed under the backward
    double hosts_rs_ms, hosts_backward_ms; // one micro-batch's reduce-scatter; the backward it runs under (sliced)
    double nic_gbps_to_hide; // the NIC rate at which the sliced sum hides under the backward (0: none does)
    double gather_ms;                   // of which the all-gather, run by the optimizer under the next forward
    double state_saved_bytes, unsharded_bytes_per_host; // sharded: the state a host does not keep; unsharded, a host's bytes
    double tokens, step_ms, tokens_per_s, tflops, tflops_per_gpu;
    double one_gpu_tokens_per_s, scaling_efficiency; // one GPU at the rank's batch; tokens/s over N*H of it
    const char *bound;                  // the rank's, or "host_memory"
    double host_bytes_per_host, pinned_bytes_per_host, host0_bytes, staging_bytes, largest_unit_bytes, gpu_bytes;
    mt_plan_prediction rank;            // one rank's closed form
} mt_plan_ranks;

// engine/hosts_mpi.c: the sum's round, bytes per host pair (the staging holds 3 H of them).
#define MT_PLAN_HOSTS_CHUNK_BYTES (64ULL << 20)

// The profile has what N GPUs and H hosts need (one line naming the missing multi.* key).
mt_status mt_plan_ranks_check(const mt_hw_profile *hw, int gpus, int hosts);
// in->eng.B is the global batch (a multiple of gpus x hosts), as `train --gpus` takes it.
mt_status mt_plan_ranks_predict(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, int gpus,
                                int hosts, mt_plan_ranks *out);

// ---------------------------------------------------------------------------
// --batch auto (batch_search.c): the batch and the knobs the schedule takes
// (--recompute, --checkpoint-interval 1|2|4, --weight-buffers 2|3) that maximise
// the predicted tokens/s within host and device memory (mt_plan_check_fit).

typedef struct {
    int B;
    mt_recompute recompute; // resolved
    int ckpt_interval, weight_bufs, offload_checkpoints;
    double gpu_bytes, host_bytes, step_ms, tokens_per_s; // the closed form's step
    double sim_step_ms, sim_tokens_per_s;                // the sim's, where it checked this one (else 0)
    const char *bound;
} mt_batch_candidate;

typedef struct {
    mt_batch_candidate *c; // every candidate that fits, in the order compared
    int n, cap;
    int best;              // index of the choice: the most tokens/s (the sim's where it ran; the first on a tie)
    int max_fit_B;         // the largest batch that fits with any of the knobs
    int n_sim;             // candidates the sim checked (the closed form's best MT_BATCH_SIM_CHECKED per policy)
} mt_batch_search;
#define MT_BATCH_SIM_CHECKED 2

// Per combination of the knobs: every power of two below the largest batch that
// fits, and that batch, priced by the closed form; with sim_profile (a profile's
// file) the closed form's best two of each recompute policy are run on the sim
// backend and the sim decides.
// vary_recompute: compare the recompute policies even where in->eng.sched.recompute
// names one (it is auto, or was not given). Needs the profile's GPU memory;
// in->gpu_free_bytes and host_free as `plan` sets them.
mt_status mt_plan_batch_search(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, int vary_recompute,
                               const char *sim_profile, mt_batch_search *out);
// One configuration's step (the median of steps 3-7) on the sim backend made from profile_path (sim_price.c).
mt_status mt_plan_sim_step_ms(const mt_config *c, const mt_plan_input *in, const char *profile_path, double *step_ms);
void mt_batch_search_free(mt_batch_search *s);
// Sets the engine options to a candidate: its batch, and the knobs the schedule takes.
void mt_batch_candidate_apply(const mt_batch_candidate *b, mt_engine_opts *o);
// One line: the choice, its predicted rate and what it was compared with.
void mt_batch_search_why(const mt_batch_search *s, const mt_hw_profile *hw, char *buf, size_t cap);

#endif
