// sim.h: the sim backend's public extras: the hardware profile it prices with,
// its cost model (pure functions of the profile and the op's shape), and the
// statistics of a simulated timeline (per-stream busy time, makespan) that a
// caller turns into gpu_busy_frac. The backend itself is created with
// mt_backend_sim_create (backend/backend.h).
//
// Cost model (every constant below is an assumption, stated once here):
//   issue      each async call costs the calling host thread MT_SIM_LAUNCH_MS
//              (CUDA launch/API latency, ~5 us); the op starts at
//              max(stream clock, host clock after the call), ends start + cost.
//   GEMM       2*M*N*K / (peak * eff(M,N,K)), peak = gpu.peak_tflops.bf16 when
//              activations are bf16, .fp32 (real fp32, no TF32) otherwise;
//              eff = base * W/(W + MT_SIM_GEMM_HALF_MACS)
//                    * min(1, min(M,N,K) / MT_SIM_GEMM_FULL_DIM),  W = M*N*K:
//              a GEMM of 1024^3 MACs runs at half the large-GEMM rate (a fixed
//              ~3.6 us of fill/tail on H100 bf16); a dimension under 64 wastes
//              tensor-core tiles. base = gpu.gemm_efficiency, but for a layer's
//              backward GEMMs (dinp and dw of matmul_bwd) with bf16 activations
//              gpu.gemm_bwd_efficiency where the profile measured it (mt-microbench
//              gemm_bwd/cuda/bf16). Roofline: never faster than its bytes at HBM.
//   attention  causal flash-style: forward 2*B*NH*T^2*HD FLOPs (QK^T and PV,
//              half masked), backward MT_ATTN_BWD_FACTOR x forward, at the
//              rate the profile measured for the implementation priced (the
//              engine's --attention, a peer's own): at the launch's work B*NH*T^2
//              (gpu.attention_work_tflops) where measured so, else at T
//              (gpu.attention_tflops), else at MT_ATTN_ASSUMED_EFF x peak
//              (mt_hw_attention_tflops, model/hardware_profile.h); roofline on the
//              bytes of qkv/out.
//   memory-bound kernels (norms, rope, swiglu, add, xent, embedding, cast):
//              bytes moved / gpu.kernel_gbps.<kernel> where the profile measured the
//              kernel (mt-microbench kernel/cuda/bf16, in these byte counts) and the
//              activations are bf16, else bytes / (gpu.hbm_gbps * MT_SIM_HBM_EFF);
//              memset and D2D copies always the latter.
//   every GPU op lasts at least MT_SIM_KERNEL_MIN_MS.
//   copies     H2D/D2H at link.{h2d,d2h}_gbps.pinned when the host side lies
//              in memory from host_alloc, .pageable otherwise; one copy at a
//              time per direction (the link), whatever stream issues it.
//              Duplex: copies are placed in enqueue order; the part of a new
//              copy that overlaps (in virtual time) copies already placed in
//              the other direction runs at link.duplex_factor x its rate. The
//              earlier copy keeps its rate, so a fully overlapped pair ends at
//              (1 + (1-f)) x solo instead of 1/f x solo (f = 0.8: 1.2 vs 1.25).
//   host work  gradient accumulate: n*3*sizeof(wdt) bytes (read dst, read slab,
//              write dst) at host.mem_gbps, then the sum-of-squares pass: one read
//              of the gradients at host.grad_sumsq_gbps (measured), else at
//              host.mem_gbps; the drain's sum of squares alone the same; AdamW:
//              n / host.adamw_params_per_s.<mode> (mode: fp32 when wdt is f32,
//              mixed with a master copy, else paper). Concurrent host threads
//              do not slow each other.
//   host memory  the copies and the host passes (drain, AdamW) share the host's
//              memory bandwidth S = host.shared_gbps, else the highest host rate
//              the profile measured (mem_gbps; AdamW's params/s x bytes/param):
//              while passes demanding a GB/s (their bytes / their priced time)
//              overlap a copy running at r, and r + a > S, the copy runs at
//              r x S/(r + a) (proportional share); the passes keep their measured
//              rates (unmeasured under a copy: harness/sweep/cost_sources.py).
//              H200: r 55.35, AdamW 143.2, S 143.2: the copy keeps 72% (74% measured).
//              Deterministic: a copy is priced once every host lane (core/vclock.h)
//              has priced its work up to the copy's end or has nothing in hand.
#ifndef MT_SIM_H
#define MT_SIM_H

#include <stddef.h>

#include "backend/backend.h"
#include "model/hardware_profile.h"

#define MT_SIM_LAUNCH_MS 0.005             // assumed: host cost of one async launch/copy call (part A: mt-microbench launch/cuda/add launch_us)
#define MT_SIM_KERNEL_MIN_MS 0.002         // assumed: shortest GPU op, launch-to-retire (part A: mt-microbench launch/cuda/add kernel_min_us)
#define MT_SIM_GEMM_HALF_MACS 1073741824.0 // assumed: M*N*K at which a GEMM reaches half its large-GEMM rate
#define MT_SIM_GEMM_FULL_DIM 64.0          // assumed: smallest dimension that fills tensor-core tiles
#define MT_SIM_MAX_LANES 16                // host thread lanes in stats and trace
#define MT_SIM_ADAMW_PAPER_BYTES 22.0      // harness/microbench/adamw.c: bytes per parameter (paper 12+10)
#define MT_SIM_ADAMW_WIDE_BYTES 28.0       // the same for mixed (14+14) and fp32 (16+12)

// The simulator prices with a megatrain.hardware/1 profile (mt_hw_profile,
// model/hardware_profile.h), loaded by mt_backend_sim_create.
// The simulator prices every op with the hardware profile at `profile_path`
// (experiments/hardware/NAME.json).
mt_status mt_backend_sim_create(const char *profile_path, mt_dtype act_dtype, mt_backend **out);
unsigned mt_backend_sim_caps(void); // its ops table's caps

// ---- the cost model: pure functions (milliseconds) ----
// backward: one of a layer's backward GEMMs (matmul_bwd's dinp or dw).
double mt_sim_gemm_eff(const mt_hw_profile *p, mt_dtype act, int backward, double M, double N, double K);
// C(M,N) = A(M,K) B(K,N); bytes = what the GEMM reads and writes (roofline).
double mt_sim_gemm_ms(const mt_hw_profile *p, mt_dtype act, int backward, double M, double N, double K, double bytes);
// `kernel`: the implementation priced (gpu.attention_tflops.<kernel>; NULL: none measured).
double mt_sim_attention_ms(const mt_hw_profile *p, const char *kernel, mt_dtype act, int backward, int B, int T,
                           int NH, int HD, double bytes);
double mt_sim_hbm_ms(const mt_hw_profile *p, double bytes);
// A memory-bound kernel moving `bytes` (its measured rate, else mt_sim_hbm_ms).
double mt_sim_kernel_ms(const mt_hw_profile *p, mt_dtype act, mt_hw_kernel k, double bytes);
// One copy alone on the link: dir MT_COPY_H2D / MT_COPY_D2H.
double mt_sim_link_ms(const mt_hw_profile *p, mt_copy_kind dir, int pinned, double bytes);
double mt_sim_host_work_ms(const mt_hw_profile *p, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master);
// The host memory a host pass moves; the bandwidth the copies and the passes share;
// the fraction of its rate a copy keeps beside passes demanding host_gbps.
double mt_sim_host_work_bytes(const mt_hw_profile *p, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master);
double mt_sim_host_shared_gbps(const mt_hw_profile *p);
double mt_sim_copy_share(const mt_hw_profile *p, double copy_gbps, double host_gbps);

// ---- what was simulated (cumulative since creation; diff two snapshots for a step) ----
typedef struct {
    double stream_busy_ms[MT_NUM_STREAMS]; // sum of op durations per stream (ops on a stream never overlap)
    double compute_busy_ms, h2d_busy_ms, d2h_busy_ms; // = stream_busy_ms[...], named for callers
    double link_busy_ms[2];                // per copy direction (H2D, D2H), whatever the stream
    double link_bytes[2];
    double collective_busy_ms;             // the device collective's reductions, on a stream of their own
    double flops;                          // GEMM + attention FLOPs executed
    double makespan_ms;                    // latest end of any GPU op or host work
    int n_host_lanes;                      // host threads that did priced work
    double host_busy_ms[MT_SIM_MAX_LANES];
    char host_lane_name[MT_SIM_MAX_LANES][32]; // "host" (creating thread), "grad-drain", "optimizer"
    size_t dev_bytes_in_use, dev_bytes_peak, host_bytes_in_use, host_bytes_peak;
    long long n_ops;                       // GPU ops simulated
    long long n_trace_dropped;             // ops beyond the trace cap (stats still count them)
} mt_sim_stats;

// MT_ERR_ARG when `be` is not a sim backend.
mt_status mt_sim_stats_get(mt_backend *be, mt_sim_stats *out);
// Recorded GPU ops on stream `s` (-1: any stream) whose name is `name` (NULL: any).
// Names are the ops-table entry ("matmul_fwd", ...) or "copy_h2d", "copy_d2h",
// "copy_d2d", "memset". Counts only what the trace kept (see n_trace_dropped).
long long mt_sim_count_ops(mt_backend *be, int s, const char *name);
// The profile a sim backend prices with (NULL for other backends).
const mt_hw_profile *mt_sim_profile_of(mt_backend *be);
// Prices with `p` from now on (a peer's profile: its optimizer's rate, engine/peer.h).
mt_status mt_sim_set_profile(mt_backend *be, const mt_hw_profile *p);
// Prices attention as implementation `kernel` runs it (a profile's gpu.attention_tflops
// name: a peer's "torch_sdpa", ...); --attention sets "native" or "cudnn" the same way.
mt_status mt_sim_set_attention_kernel(mt_backend *be, const char *kernel);
// The implementation priced (the name looked up in the profile).
const char *mt_sim_attention_kernel(mt_backend *be);

#endif
