// engine.h: one training engine = a host model + a backend + a schedule.
// The schedule decides where weights live and when they move; the layer
// template, the loss head and the host optimizer are shared by all schedules,
// so every schedule computes the same numbers.
#ifndef MT_ENGINE_H
#define MT_ENGINE_H

#include <stdint.h>

#include "backend/backend.h"
#include "engine/host_state.h"
#include "engine/schedule.h"

// How a weight gradient computed in token chunks (the MLP's, the LM head's) is summed
// across the chunks of a micro-batch when weight gradients are bf16 (paper, mixed):
// in an f32 device buffer, rounded to bf16 once (F32), or in the bf16 gradient itself,
// one rounding per chunk, as the official code's autograd does (BF16). AUTO (the
// default, and what a zeroed options struct says): F32 where the device plan fits it.
typedef enum { MT_GRAD_SUM_AUTO = 0, MT_GRAD_SUM_F32 = 1, MT_GRAD_SUM_BF16 = 2 } mt_grad_sum;
mt_status mt_grad_sum_parse(const char *s, mt_grad_sum *out); // "auto", "f32", "bf16"
const char *mt_grad_sum_name(mt_grad_sum g);

typedef struct {
    const mt_schedule_desc *schedule; // a table entry (mt_schedule_find); resolved against the options here
    int B, T, grad_accum;  // micro-batch rows, sequence length, micro-batches per step
    mt_grad_sum grad_sum;  // chunked weight gradients summed in f32 or bf16 (--grad-accum-dtype)
    int grad_slabs;        // pinned host slabs gradients stream through
    int mlp_rows;          // tokens per MLP chunk (0 = all at once); bounds the largest activations
    int keep_trace;        // keep every step's timeline for mt_engine_write_trace (--trace)
    mt_schedule_opts sched; // what the schedule may take from the options: weight buffers, K (keep the input
                            // of every K-th layer, recompute the rest), serial optimizer, checkpoint offload
                            // (1: layer-boundary checkpoints in pinned host memory, 3 device slots; 0: on the
                            // device; -1 auto: offload only when the device plan does not fit), bind, ZeRO-3 knobs,
                            // speculative step (1, 0, -1 auto)
    int device_optimizer;   // --device-optimizer: units whose optimizer state lives and updates on the device
                            // (engine/device_optimizer.h); 0 off (the default: today's engine), -1 auto
    size_t host_free;       // host bytes the whole plan may use, state included (0 = unknown: no limit); the
                            // speculative step keeps spare state blocks only for the units that fit in it
} mt_engine_opts;

// The one set of defaults (docs/DESIGN.md#cli): the megatrain schedule, batch 4
// x 64 tokens, no accumulation, K = 1, 2 weight buffers, 4 gradient slabs, 8k-token MLP
// chunks, chunked gradients summed in f32 where it fits (auto), checkpoint offload auto,
// pointer bind, DeepSpeed's ZeRO-3 knobs.
void mt_engine_opts_defaults(mt_engine_opts *o);
// The one validation, against the model: what train, eval, plan and the planner
// accept (one line naming the option).
mt_status mt_engine_opts_validate(const mt_engine_opts *o, const mt_config *c);
// Before anything is allocated: everything the run will hold in host memory (the
// model state, pinned slabs and staging, the speculative step's copies, and the
// device plan where the device's memory is host memory) against MemAvailable (or
// the simulated machine's): a one-line error naming the parts when it cannot fit.
mt_status mt_engine_check_host_memory(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_backend *be);
// The same for --gpus N (o->B the global batch): one model state and optimizer, N ranks'
// slabs and staging, and N ranks' device buffers where the device's memory is host memory;
// the state as this host keeps it (sl: its slice across hosts, host_state.h; NULL: whole).
mt_status mt_engine_check_host_memory_ranks(const mt_config *c, mt_precision p, const mt_engine_opts *o,
                                            mt_backend *be, int n_ranks, const mt_state_slice *sl);
// The part of it that needs no model: --recompute against the schedule and K, offload (the CLI refuses early).
mt_status mt_engine_opts_check_recompute(const mt_engine_opts *o);
// The part of it that needs no model: --speculative-step against the schedule (the CLI refuses early).
mt_status mt_engine_opts_check_speculative(const mt_engine_opts *o);
// ... and --embedding-rows-first against the schedule.
mt_status mt_engine_opts_check_rows_first(const mt_engine_opts *o);
// ... and --update-parts against the schedule and the weight ring's pieces.
mt_status mt_engine_opts_check_update_parts(const mt_engine_opts *o);

typedef struct {
    float lr, weight_decay, beta1, beta2, eps, grad_clip; // grad_clip 0 = off
    int skipped_before; // steps skipped so far for non-finite gradients: Adam's step count is step - skipped_before
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
    // The non-finite policy: a non-finite global norm skips the step (no parameter or
    // moment changes, as PyTorch's GradScaler skips optimizer.step()).
    int skipped;
    // The speculative step: units updated under the backward with clip scale 1, and
    // those of them whose result was dropped and redone (clipping or a skip).
    int spec_units, rollbacks;
} mt_step_stats;

typedef struct mt_engine mt_engine;

// What one part of the engine occupies (parts.h).
typedef struct {
    size_t device; // device memory
    size_t host;   // host memory (pinned or not)
    size_t pinned; // the part of `host` that is page-locked
} mt_part_bytes;

// What a configuration occupies, part by part, without allocating anything:
// the planner's source of truth, and what mt_engine_create allocates (checked).
typedef struct {
    mt_part_bytes state;       // host model state: parameters, gradients, moments, f32 master
    mt_part_bytes weights;     // device weight ring (+ the copy-bind template) and resident embedding/head
    mt_part_bytes grads;       // device gradient buffers and wire staging; pinned gradient slabs
    mt_part_bytes checkpoints; // saved layer inputs: on the device, or pinned host + 3 device slots
    mt_part_bytes activations; // layer internals, scratch, loss head, RoPE tables; pinned token staging
    mt_part_bytes optimizer;   // the optimizer worker's own buffers
    mt_part_bytes scratch;     // an f32-only backend's kernel scratch (cpu: bf16 weights widened, dW in f32)
    size_t device_bytes, host_bytes, pinned_bytes; // the sums
    int offload_checkpoints;   // the resolved choice (auto resolved against device_free)
    int spec_window;           // speculative step: units with spare state blocks (0: speculation off),
                               // against host_free
    int grad_sum_f32;          // the resolved choice: chunked weight gradients summed in f32 (fp32: always)
    mt_recompute recompute;    // the resolved --recompute (auto: against device_free); full where not taken
    size_t rows_cap;           // the embedding's rows first: the most rows a step stages (0: off)
    size_t rows_bytes;         // host: the embedding's rows first (the optimizer's stage and the rows' tables;
                               // part of optimizer.host and weights.host), 0 when off
    size_t grad_sum_bytes;     // its f32 device buffer (part of grads.device): the larger of the MLP's
                               // (gate, up, down) and the LM head's gradient, when each runs in > 1 chunk
} mt_engine_footprint;

// offload_checkpoints = -1 is resolved against device_free (0 = unknown: keep on the device);
// then grad_sum AUTO: f32 unless its buffer makes the plan exceed device_free.
// backend_caps: 0 for what the configuration needs (the plan); a backend's caps for
// what its engine allocates (on a device the loss head's chunk grows into free memory).
mt_engine_footprint mt_engine_footprint_of(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act,
                                           size_t device_free, unsigned backend_caps);

// Validates the options against the model and allocates device buffers.
mt_status mt_engine_create(mt_model *m, mt_backend *be, const mt_engine_opts *o, mt_engine **out);
// --gpus N (docs/DESIGN.md#several-gpus): one engine per backend in bes[0..n_ranks), each a
// data-parallel rank over B/N rows of every micro-batch (o->B is the global batch), all on
// the one host state of m with one optimizer; the ranks' gradients are reduced per unit and
// micro-batch (engine/collective.h) so that AdamW runs once per parameter. Returns rank 0's
// engine, which the rest of this API takes (and mt_engine_destroy frees with the others).
mt_status mt_engine_create_ranks(mt_model *m, mt_backend **bes, int n_ranks, const mt_engine_opts *o,
                                 mt_engine **out);
// Several hosts (engine/hosts.h, MPI): this process is host h->rank of h->n, its engine's
// o->B the host's share of the global batch; each step's inputs are the global batch's, and
// the hosts' gradients are summed in host order before the norm. Needs the speculative step
// off. Before the first step; h outlives the engine (NULL or one host: nothing changes).
struct mt_hosts;
mt_status mt_engine_set_hosts(mt_engine *e, struct mt_hosts *h);
// --shard-optimizer hosts (after mt_engine_set_hosts): each host keeps and updates the moments
// and master of its slice of every unit (engine/host_shard.h) and the updated parameters are
// all-gathered after each step; the rest of the state's pages are given back. A save or a load
// then goes through m->shards (engine/host_shard.h), which the caller sets.
mt_status mt_engine_shard_optimizer(mt_engine *e);

// The batch against the ranks: B rows split into N equal slices (one line naming both otherwise).
mt_status mt_engine_check_ranks(int B, int n_ranks);
void mt_engine_destroy(mt_engine *e);

// The next step's inputs (as mt_engine_step takes them), given before this step: its
// optimizer pass then updates the embedding rows they read first, and the next forward
// waits for and copies in only those (--embedding-rows-first, engine/embed_rows.h). The
// same parameters whether it is called or not; `next` is read before this returns.
void mt_engine_next_inputs(mt_engine *e, const int32_t *next);
// One optimizer step over grad_accum micro-batches. inputs/targets hold
// grad_accum * B * T token ids (micro-batch-major). `step` is 1-based (Adam's
// bias correction). With overlap the parameter update is still running when
// this returns; the next step (or mt_engine_finish) waits for it unit by unit.
mt_status mt_engine_step(mt_engine *e, const int32_t *inputs, const int32_t *targets, const mt_optim_hparams *hp,
                         float lr, int step, mt_step_stats *st);
// The resolved --grad-accum-dtype: MT_GRAD_SUM_F32 or MT_GRAD_SUM_BF16 (f32 for fp32 precision).
mt_grad_sum mt_engine_grad_sum(const mt_engine *e);
// The resolved --device-optimizer: units updated on the device (0: off), *bytes their device state.
int mt_engine_device_units(const mt_engine *e, size_t *bytes);
// The resolved --recompute (auto resolved against the device's free memory).
mt_recompute mt_engine_recompute(const mt_engine *e);
// The engine's clock (ms): wall time, or virtual time under the sim backend.
double mt_engine_now_ms(const mt_engine *e);
// Writes the Chrome/Perfetto timeline of every step so far (needs keep_trace).
mt_status mt_engine_write_trace(mt_engine *e, const char *path);
// Waits until every pending parameter update has landed in host memory.
mt_status mt_engine_finish(mt_engine *e);
// Forward only over one micro-batch: returns the summed token losses.
mt_status mt_engine_eval(mt_engine *e, const int32_t *inputs, const int32_t *targets, double *loss_sum);

#endif
