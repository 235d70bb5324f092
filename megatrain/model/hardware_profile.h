// hardware_profile.h: one machine described by experiments/hardware/NAME.json
// (schema megatrain.hardware/1, keys in experiments/hardware/README.md): the
// one loader and validation, and the lookup of a profile by name, shared by
// the planner (`megatrain plan --hardware`) and the sim backend, which prices
// its ops with these figures. Rates in decimal units, as in the file.
#ifndef MT_HARDWARE_PROFILE_H
#define MT_HARDWARE_PROFILE_H

#include <stddef.h>

#include "core/status.h"

enum { MT_PEAK_BF16 = 0, MT_PEAK_TF32 = 1, MT_PEAK_FP32 = 2 };
// Index of adamw_params_per_s: the order of mt_precision (engine/host_state.h).
enum { MT_ADAMW_PAPER = 0, MT_ADAMW_MIXED = 1, MT_ADAMW_FP32 = 2 };

// Attention without a measurement of its implementation in the profile runs at this
// fraction of the dense peak: assumed, a FlashAttention-2-class kernel (the
// FlashAttention-3 paper, arXiv 2407.08608: "FlashAttention-2 achieves only 35%
// utilization on the H100"); applied to forward and backward alike.
#define MT_ATTN_ASSUMED_EFF 0.35
// The sim's memory-bound kernels where the profile measured none, and the planner's device AdamW:
#define MT_SIM_HBM_EFF 0.8 // assumed: streaming kernels reach ~80% of datasheet HBM bandwidth
#define MT_ATTN_BWD_FACTOR 2.5 // backward runs 5 GEMM-like products vs forward's 2 (the labs count so too)
#define MT_HW_ATTN_KERNELS 8  // implementations a profile may measure
#define MT_HW_ATTN_POINTS 16  // points per table (sequence lengths, or works)
#define MT_HW_NAME_MATCH 4    // gpu.name_match strings a profile may list

// gpu.attention_tflops.<kernel>: measured causal attention forward + backward of one
// implementation at bf16, as [[T, TFLOP/s], ...] (FLOPs counted causally: forward
// 2*B*NH*T^2*HD, backward 2.5x; the attention lab's and torch_reference.py's
// convention), with its sources entry. Kernel names are the labs' bench names:
// native, cudnn (ours), torch_sdpa (PyTorch's own choice), torch_sdpa_flash, ...
// gpu.attention_work_tflops.<kernel> (optional, measured: mt-microbench attention/cuda at
// a model's batch x heads): the same rate as [[B*NH*T^2, TFLOP/s], ...], keyed by the work
// of one launch rather than T alone (a table by T was measured at one B x NH).
typedef struct {
    char kernel[32];
    int n;                                       // points, ascending x
    double x[MT_HW_ATTN_POINTS];                 // T, or B*NH*T^2 in a work table
    double tflops[MT_HW_ATTN_POINTS];
    char source[320];
} mt_hw_attn_rate;

// The memory-bound kernels the sim prices by the bytes they move (backends/sim/sim_kernels.c).
// Each may have a measured rate gpu.kernel_gbps.<name> (mt_hw_kernel_name): the sim's byte
// count of one call over its time, at bf16 (mt-microbench kernel/cuda/bf16/<name>/..., whose
// sim_gbps counter counts the sim's bytes).
typedef enum {
    MT_HW_K_EMBEDDING_FWD, MT_HW_K_EMBEDDING_BWD, MT_HW_K_RMSNORM_FWD, MT_HW_K_RMSNORM_BWD,
    MT_HW_K_ADD_RMSNORM_FWD, MT_HW_K_RMSNORM_BWD_ADD, MT_HW_K_QK_NORM_FWD, MT_HW_K_QK_NORM_BWD,
    MT_HW_K_ROPE_FWD, MT_HW_K_ROPE_BWD, MT_HW_K_SWIGLU_FWD, MT_HW_K_SWIGLU_BWD, MT_HW_K_ADD,
    MT_HW_K_XENT_FWD_BWD, MT_HW_K_CAST, MT_HW_KERNELS
} mt_hw_kernel;
// "rmsnorm_fwd", ...: the op's name in the sim's trace and in the profile key.
const char *mt_hw_kernel_name(mt_hw_kernel k);

// The optional multi.* keys (experiments/hardware/README.md): how N GPUs of one host and H
// hosts are connected. Rates are per direction, decimal GB/s, as every rate in a profile.
typedef struct {
    int gpus_per_host;            // multi.gpus_per_host
    int gpus_per_pcie_switch;     // multi.gpus_per_pcie_switch: GPUs behind one switch's uplink to the CPU
    double pcie_uplink_gbps;      // multi.pcie_switch_uplink_gbps: that uplink, per direction (copies as measured)
    double nvlink_gbps;           // multi.nvlink_gbps: one GPU's NVLink per direction (0 and no key: PCIe peer traffic)
    double collective_gbps;       // multi.collective_gbps: the bus bandwidth NCCL's ring reaches between the GPUs
    double nic_gbps;              // multi.nic_gbps: one host's network bandwidth to the others, per direction
} mt_hw_multi;

typedef struct {
    char name[64];
    char source[1100];     // the file read, or "measured"
    char description[256];
    char gpu_name[128];
    // gpu.name_match (optional): strings of a GPU's name that make this profile its
    // machine's ("*": the profile when none matches); planner/measured_profile.c
    char gpu_name_match[MT_HW_NAME_MATCH][32];
    int n_gpu_name_match;
    double peak_tflops[3]; // dense peak by compute precision: MT_PEAK_BF16, _TF32, _FP32
    double gemm_efficiency;
    double hbm_gbps, hbm_bytes;
    double h2d_gbps, d2h_gbps;                   // pinned, one direction alone
    double h2d_pageable_gbps, d2h_pageable_gbps;
    double duplex_factor;                        // each direction's share of its solo rate under duplex
    double host_mem_bytes, host_mem_gbps;
    int cpu_cores, numa_nodes;
    double adamw_params_per_s[3];                // MT_ADAMW_PAPER, _MIXED, _FP32
    // host.cpu_optimizers (optional): a file of CPU AdamW passes measured on this host
    // (baselines/peers/cpu_optimizers.py rows, repo-relative): the peers' optimizer
    // rates come from it before the dev machine's results/cpu_optimizers.jsonl
    char cpu_optimizers[256];
    int n_attn;                                  // measured attention implementations (optional key)
    mt_hw_attn_rate attn[MT_HW_ATTN_KERNELS];
    // Optional measured GPU rates (model/hardware_rates.c); absent (0), the sim's assumption
    // stands: gpu.gemm_bwd_efficiency (backward GEMMs, dinp + dw, at bf16; else gemm_efficiency),
    // gpu.kernel_gbps.<kernel> (else MT_SIM_HBM_EFF x hbm_gbps), gpu.attention_work_tflops.<kernel>
    // (else the table by T, else MT_ATTN_ASSUMED_EFF x peak).
    double gemm_bwd_efficiency;
    double kernel_gbps[MT_HW_KERNELS];
    // host.grad_sumsq_gbps (optional): the gradient drain's sum of squares alone (mt-microbench
    // grad_sumsq/bf16, one read of the gradients); absent (0), the sim prices it at host.mem_gbps.
    double grad_sumsq_gbps;
    // host.shared_gbps (optional): the host memory bandwidth that the link's copies and the
    // host's passes (drain, AdamW) share; absent (0), the highest host rate the profile
    // measured (mem_gbps, each AdamW mode's params/s x bytes/param): mt_sim_host_shared_gbps.
    double host_shared_gbps;
    int n_attn_work;
    mt_hw_attn_rate attn_work[MT_HW_ATTN_KERNELS];
    double pinned_limit_bytes;                   // page-lock limit below host memory (ulimit -l), 0 = none
    // host.adamw_bytes_per_param (MT_ADAMW_*): the host memory traffic of one parameter's update
    // (what several GPUs' copy streams share the memory bandwidth with; planner/ranks.c). 0: absent.
    double adamw_bytes_per_param[3];
    // multi.* (optional; planner/ranks.c, `plan --gpus N --hosts H`): the machine with several GPUs.
    // 0 = absent: a plan for N > 1 names the missing key.
    mt_hw_multi multi;
    int measured;                                // built from this machine (planner/measured_profile.c)
    char measured_note[512];                     // what was read and what was assumed
} mt_hw_profile;

// The rate (TFLOP/s, causal convention above) at which `kernel` runs attention over B
// sequences of T tokens with NH query heads, when the activations are bf16 (what was
// measured): its work table at B*NH*T^2 when the profile has one, else its table by T;
// either interpolated linearly in the log of the key between measured points and held
// flat beyond them. Else (no table, or f32) MT_ATTN_ASSUMED_EFF x the dense peak of the
// compute precision. *source (may be NULL) says which, in words.
double mt_hw_attention_tflops(const mt_hw_profile *p, const char *kernel, int bf16, double B, double NH, double T,
                              const char **source);

// Reads and validates a profile file; errors are one line naming the file and
// the key: "x.json: link.h2d_gbps.pinned: required number is missing".
mt_status mt_hw_profile_load(const char *path, mt_hw_profile *out);
// `spec` is a path (contains '/' or ends in .json) or a profile name looked up
// in mt_hw_profile_dir(); writes the file's path. An unknown name fails with
// the available names.
mt_status mt_hw_profile_find(const char *spec, char *path, size_t cap);
// The directory searched for NAME.json: $MT_HARDWARE_DIR, ./experiments/hardware,
// next to the binary (<exe>/../../experiments/hardware), then the source tree's.
// NULL when none exists.
const char *mt_hw_profile_dir(void);
// Comma-separated names of the profiles in the directory (empty when none).
void mt_hw_profile_list(char *buf, size_t cap);

#endif
