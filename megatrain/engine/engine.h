// engine.h: one training engine = a host model + a backend + a schedule.
// The schedule decides where weights live and when they move; the layer
// template, the loss head and the host optimizer are shared by all schedules,
// so every schedule computes the same numbers.
#ifndef MT_ENGINE_H
#define MT_ENGINE_H

#include <stdint.h>

#include "backend/backend.h"
#include "engine/host_state.h"

typedef enum {
    MT_SCHED_MEGATRAIN = 0, // stream layers through a ring of device buffers, recompute, overlapped optimizer
    MT_SCHED_RESIDENT = 1,  // every layer resident, all activations kept, optimizer after backward
    MT_SCHED_ZERO3 = 2,     // DeepSpeed ZeRO-3 + CPU offload, as a schedule (see baselines/ZERO3.md)
    MT_SCHED_NAIVE = 3,     // one stream: copy in, compute, copy out; no prefetch; optimizer after backward
} mt_schedule;

// DeepSpeed's ZeRO-3 knobs under DeepSpeed's names and defaults. They change
// timing, never results (every schedule computes the same numbers).
typedef struct {
    int pin_memory;                    // host state page-locked (1) or pageable (0)
    int overlap_comm;                  // gradient offload on its own stream (1) or the compute stream (0)
    long long prefetch_bucket_size;    // stage3_prefetch_bucket_size: elements fetched ahead of use
    long long param_persistence_threshold; // stage3_param_persistence_threshold
    long long reduce_bucket_size;      // reduce_bucket_size (elements)
    long long max_live_parameters;     // stage3_max_live_parameters
} mt_zero3_knobs;

// DeepSpeed's defaults: pin_memory true, overlap_comm true, 5e7, 1e5, 5e8, 1e9.
mt_zero3_knobs mt_zero3_defaults(void);

mt_status mt_schedule_parse(const char *s, mt_schedule *out);
const char *mt_schedule_name(mt_schedule s);

// How a weight gradient computed in token chunks (the MLP's, the LM head's) is summed
// across the chunks of a micro-batch when weight gradients are bf16 (paper, mixed):
// in an f32 device buffer, rounded to bf16 once (F32), or in the bf16 gradient itself,
// one rounding per chunk, as the official code's autograd does (BF16). AUTO (the
// default, and what a zeroed options struct says): F32 where the device plan fits it.
typedef enum { MT_GRAD_SUM_AUTO = 0, MT_GRAD_SUM_F32 = 1, MT_GRAD_SUM_BF16 = 2 } mt_grad_sum;
mt_status mt_grad_sum_parse(const char *s, mt_grad_sum *out); // "auto", "f32", "bf16"

typedef struct {
    mt_schedule schedule;
    int B, T, grad_accum;  // micro-batch rows, sequence length, micro-batches per step
    mt_grad_sum grad_sum;  // chunked weight gradients summed in f32 or bf16 (--grad-accum-dtype)
    int ckpt_interval;     // K: keep the input of every K-th layer, recompute the rest
    int weight_bufs;       // device weight buffers in the ring (1: no prefetch, 2 or 3)
    int grad_slabs;        // pinned host slabs gradients stream through
    int overlap_optimizer; // update layer i while the next step already streams
    int offload_checkpoints; // 1: layer-boundary checkpoints live in pinned host memory, 3 device slots
                             // stream them out in forward and back in backward; 0: on the device;
                             // -1 (auto): offload only when the device plan does not fit
    int mlp_rows;          // tokens per MLP chunk (0 = all at once); bounds the largest activations
    int keep_trace;        // keep every step's timeline for mt_engine_write_trace (--trace)
    int copy_bind;         // ablation: bind by copying into a fixed template buffer (the official code's way)
    mt_zero3_knobs zero3;  // used by MT_SCHED_ZERO3
} mt_engine_opts;

typedef struct {
    float lr, weight_decay, beta1, beta2, eps, grad_clip; // grad_clip 0 = off
} mt_optim_hparams;

typedef struct {
    double loss;          // mean cross-entropy over the step's tokens
    double grad_norm;     // global L2 norm before clipping
    double clip_factor;
    long long tokens;
    double opt_wait_ms;   // host time the schedule waited for the optimizer
    double drain_wait_ms; // host time waiting for gradient slabs / drains
    // Per-phase busy time within the step (union of spans per lane), from events:
    double compute_ms, h2d_ms, d2h_ms, drain_ms, optimizer_ms, span_ms;
    double h2d_bytes, d2h_bytes; // bytes that crossed the link this step
} mt_step_stats;

typedef struct mt_engine mt_engine;

// What a configuration needs, without allocating it (the planner's source of truth).
typedef struct {
    size_t device_bytes;     // = weights + grads + checkpoints + activations
    size_t weights_bytes;    // layer weight buffers + resident embedding/head
    size_t grads_bytes;      // device gradient buffers
    size_t checkpoint_bytes; // saved layer inputs
    size_t activation_bytes; // one layer's internals (all layers' when resident), scratch, loss head
    size_t state_bytes;      // host model state (params, grads, moments, master)
    size_t staging_bytes;    // pinned gradient slabs and token staging
    size_t host_bytes;       // state + staging
    size_t pinned_bytes;     // host bytes that are page-locked
    size_t checkpoint_host_bytes; // offloaded checkpoints (part of host and pinned bytes)
    int offload_checkpoints;      // the resolved choice (auto resolved against device_free)
    int grad_sum_f32;             // the resolved choice: chunked weight gradients summed in f32
    size_t grad_sum_bytes;        // its f32 device buffer (part of grads_bytes): the larger of the MLP's
                                  // (gate, up, down) and the LM head's gradient, when each runs in > 1 chunk
} mt_memory_plan;

// offload_checkpoints = -1 is resolved against device_free (0 = unknown: keep on the device);
// then grad_sum AUTO: f32 unless its buffer makes the plan exceed device_free.
mt_memory_plan mt_engine_memory_plan(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act,
                                     size_t device_free);

// Validates the options against the model and allocates device buffers.
mt_status mt_engine_create(mt_model *m, mt_backend *be, const mt_engine_opts *o, mt_engine **out);
void mt_engine_destroy(mt_engine *e);

// One optimizer step over grad_accum micro-batches. inputs/targets hold
// grad_accum * B * T token ids (micro-batch-major). `step` is 1-based (Adam's
// bias correction). With overlap the parameter update is still running when
// this returns; the next step (or mt_engine_finish) waits for it unit by unit.
mt_status mt_engine_step(mt_engine *e, const int32_t *inputs, const int32_t *targets, const mt_optim_hparams *hp,
                         float lr, int step, mt_step_stats *st);
// The resolved --grad-accum-dtype: MT_GRAD_SUM_F32 or MT_GRAD_SUM_BF16 (f32 for fp32 precision).
mt_grad_sum mt_engine_grad_sum(const mt_engine *e);
// The engine's clock (ms): wall time, or virtual time under the sim backend.
double mt_engine_now_ms(const mt_engine *e);
// Writes the Chrome/Perfetto timeline of every step so far (needs keep_trace).
mt_status mt_engine_write_trace(mt_engine *e, const char *path);
// Waits until every pending parameter update has landed in host memory.
mt_status mt_engine_finish(mt_engine *e);
// Forward only over one micro-batch: returns the summed token losses.
mt_status mt_engine_eval(mt_engine *e, const int32_t *inputs, const int32_t *targets, double *loss_sum);

#endif
