// schedule.h: the schedule table. A schedule is one descriptor (weights, fetch and bind, activations,
// streams, wire dtypes, optimizer overlap) that the engine and planner read, never a schedule's name. A row
// marks (`takes`) which fields the user's options decide; mt_schedule_resolve applies them. To add a
// schedule, add a row to schedule.c; a peer is a row too (`.peer = 1`, costs in engine/peer.c).
#ifndef MT_SCHEDULE_H
#define MT_SCHEDULE_H

#include "backend/backend.h"
#include "model/config.h"

typedef enum { MT_BIND_POINTER = 0, MT_BIND_COPY = 1 } mt_bind_mode;

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

// Parts of a unit's update after the norm (update_parts, --update-parts; at most
// MT_MAX_SUBMODULES, the weight ring's pieces): each about 1/8 of the unit (29M
// parameters, 4.5 ms of AdamW at 6.5e9/s, for a 7B layer), so a unit's copy trails its update
// by one part; small enough, a part is still a long vector pass.
#define MT_UPDATE_PARTS 8

// Element range [lo, hi) of part p of n elements in `parts` parts, cut at multiples of 64.
static inline void mt_update_part(size_t n, int parts, int p, size_t *lo, size_t *hi) {
    size_t step = (n / (size_t)parts + 63) / 64 * 64;
    *lo = (size_t)p * step < n ? (size_t)p * step : n;
    *hi = p == parts - 1 ? n : ((size_t)(p + 1) * step < n ? (size_t)(p + 1) * step : n);
}

// Which descriptor fields a schedule takes from the user's options.
enum {
    MT_TAKES_WEIGHT_BUFS = 1 << 0,   // --weight-buffers
    MT_TAKES_CKPT_INTERVAL = 1 << 1, // --checkpoint-interval
    MT_TAKES_SERIAL_OPT = 1 << 2,    // --serial-optimizer
    MT_TAKES_OFFLOAD_CKPT = 1 << 3,  // --offload-checkpoints
    MT_TAKES_ZERO3 = 1 << 4,         // --zero3-* (DeepSpeed's knobs)
    MT_TAKES_BIND = 1 << 5,          // --bind (our schedules bind either way; a peer binds as it does)
    MT_TAKES_SPECULATIVE = 1 << 6,   // --speculative-step (the optimizer may run under the backward)
    MT_TAKES_RECOMPUTE = 1 << 7,     // --recompute (what the backward recomputes while weights stream)
    MT_TAKES_ROWS_FIRST = 1 << 8,    // --embedding-rows-first (the next batch's embedding rows updated first)
    MT_TAKES_UPDATE_PARTS = 1 << 9,  // --update-parts (a unit's update after the norm in parts, each copied as done)
};

// --recompute: what the backward recomputes, from the least device memory to the most
// (docs/DESIGN.md#cli), tensors chosen by bytes saved per FLOP recomputed. full: every
// K-th layer input is kept and each layer's forward re-runs in backward. The others keep
// every layer's input, attention's q/k/v, output and log-sum-exp, and x_mid, and recompute
// cheapest first: swiglu: SwiGLU's product (elementwise); norms: and the two RMSNorm
// outputs (elementwise, from the kept input and x_mid); mlp: and the MLP's gate/up GEMM,
// chunk by chunk. none: nothing. auto (-1): the least recompute whose device plan fits
// (mt_engine_shape_init).
typedef enum {
    MT_RECOMPUTE_AUTO = -1,
    MT_RECOMPUTE_FULL = 0,
    MT_RECOMPUTE_MLP = 1,
    MT_RECOMPUTE_NORMS = 2,
    MT_RECOMPUTE_SWIGLU = 3,
    MT_RECOMPUTE_NONE = 4,
} mt_recompute;
mt_status mt_recompute_parse(const char *s, mt_recompute *out);
const char *mt_recompute_name(mt_recompute r);

typedef struct mt_schedule_desc mt_schedule_desc;

// The user's side of a run: what the schedule may take from the options.
typedef struct {
    int weight_bufs, ckpt_interval, serial_optimizer, offload_checkpoints; // offload: 1, 0, -1 auto
    mt_bind_mode bind;
    mt_zero3_knobs zero3;
    int speculative; // --speculative-step: 1, 0, -1 auto (on where the optimizer overlaps the next step)
    mt_recompute recompute; // --recompute (MT_TAKES_RECOMPUTE); 0 = full, the default
    int rows_first;  // --embedding-rows-first: 1, 0, -1 auto (on where the optimizer overlaps the next step)
    int update_parts; // --update-parts N (1: whole units); 0: the schedule's (MT_UPDATE_PARTS)
} mt_schedule_opts;

struct mt_schedule_desc {
    const char *name;
    const char *summary;     // one line, for --help and the plan's JSON
    unsigned takes;          // MT_TAKES_*: fields the options decide
    int peer;                // 1: a peer as it runs (engine/peer.h: --peer, sim and plan only; not --schedule)

    // ---- layer weights on the device
    int weights_resident;    // 1: one device buffer per layer, loaded once per step (no streaming)
    int weight_bufs;         // device buffers in the ring (resolved: L when resident)
    int lookahead;           // resolved: weight uses loaded ahead of the compute (ring - 1)
    mt_bind_mode bind;       // the template points into the buffer, or the buffer is copied into it
    int submodule_fetch;     // a layer loads as one copy per submodule (mt_layout_submodules), as ZeRO-3 fetches
    long long prefetch_elems;// elements loaded ahead of use beyond what the compute needs (-1: the ring alone)

    // ---- activations
    int keep_activations;    // 1: every layer's input and internals stay on the device (no layer recompute)
    int keep_mlp;            // with keep_activations, the MLP's internals kept for every token: 0 none (gate/up
                             // and SwiGLU recomputed per chunk in backward), 1 the gate/up output, 2 and SwiGLU's
                             // product
    int recompute_norms;     // with keep_activations: the RMSNorm outputs are recomputed in backward, not kept
    mt_recompute recompute;  // resolved --recompute where the schedule takes it (auto until mt_engine_shape_init)
    int ckpt_interval;       // K: keep the input of every K-th layer, recompute the rest
    int offload_checkpoints; // layer-boundary checkpoints in pinned host memory: 1, 0, -1 auto (resolved later)

    // ---- the link
    int serial_link;         // every copy on the compute stream: nothing overlaps the compute
    int grads_on_compute;    // gradients leave on the compute stream (ZeRO-3 without overlap_comm)
    int grad_wire_f32;       // gradients cross the link as f32 (DeepSpeed offloads fp32 gradients)
    int host_pinned;         // the link side of the host state is page-locked

    // ---- the optimizer
    int optimizer_overlapped;// 1: unit i's update runs under the next step's forward; 0: after backward
    int optimizer_master;    // the real system updates an f32 master copy (the planner prices the mixed rate)
    int speculative;         // 1: a unit's update runs as soon as its gradient is final, under the backward,
                             // with clip scale 1, and is rolled back and redone when the global norm says so
                             // (resolved; the window of units it may run ahead for is the plan's: parts.h)
    int update_parts;        // a unit's update after the norm runs in this many parts, each copied in as it is
                             // done, so a unit's link copy overlaps its own AdamW (0: whole units; resolved:
                             // 0 without the overlapped optimizer, whose step waits for every update anyway)
    int rows_first;          // 1: the embedding rows the next step reads are updated first and only they cross
                             // the link before its forward; the other rows are updated under it (resolved;
                             // an untied embedding only: parts.h rows_cap)

    // ---- what only a peer does (engine/peer.h; 0 for our schedules)
    int weight_passes;       // 3: every layer crosses in forward, in its block's recompute (the block's last
                             // layer too) and again in backward, whose layer re-runs its forward first
                             // (the official MegaTrain); 0: ours (consecutive uses share a load)
    int param_wire_f32;      // parameters cross the link as f32 from the f32 master and are cast on the
                             // device (FSDP2 CPUOffloadPolicy: fp32 shards, param_dtype bf16)
    const char *attention_kernel; // the attention implementation it runs, as a hardware profile names
                             // it (gpu.attention_tflops.<name>); NULL: ours, chosen by --attention
    double fetch_overhead_ms;// host time per fetch (a submodule, or a layer when not per submodule) that
                             // the peer's Python hooks spend before the compute can be issued
    int dp_host_add;         // several GPUs (planner/ranks.c): 1: every rank copies its whole gradient out
                             // and adds it into the one host gradient under one lock (the official code's
                             // spawned workers, no NCCL); 0: ours (a reduce-scatter, each rank copies 1/N)
    double eager_scale;      // a peer running HF's model in eager PyTorch: the time its kernels other than
                             // attention take over ours (GEMMs and memory-bound ops alike; attention has
                             // its implementation's own measured rate); 0: ours (1)

    // ---- what the planner reports beside the engine's own accounting
    int host_bytes_per_param[3]; // by mt_precision: host bytes per parameter the real system keeps
                                 // (0: this engine's own state, mt_model_host_bytes)
    mt_zero3_knobs zero3;    // with MT_TAKES_ZERO3: DeepSpeed's knobs (the planner adds its GPU footprint)

    // Fields that follow from the options in a way only this schedule knows
    // (ZeRO-3: ring depth from the prefetch bucket); NULL when none.
    void (*derive)(mt_schedule_desc *d, const mt_config *c);
};

// The table, for --help and tests: count and entry i.
int mt_schedule_count(void);
const mt_schedule_desc *mt_schedule_at(int i);
// Entry by name for --schedule; an unknown name (or a peer's) fails naming --schedule and the known names.
mt_status mt_schedule_find(const char *name, const mt_schedule_desc **out);
// Any row by name, the peers' included (NULL when none).
const mt_schedule_desc *mt_schedule_row(const char *name);
// The descriptor a run uses: the entry with the options it takes filled in and
// the derived fields resolved against the model (ring at most L layers deep).
void mt_schedule_resolve(const mt_schedule_desc *entry, const mt_schedule_opts *o, const mt_config *c,
                         mt_schedule_desc *out);
// Sets the activation fields for a recompute policy (not auto): what is kept, and with
// every layer's input kept, K = 1 and no checkpoint offload.
void mt_schedule_set_recompute(mt_schedule_desc *d, mt_recompute r);
// The dtype gradients cross the link in: f32 when the schedule says so, else the weights' dtype.
static inline mt_dtype mt_schedule_grad_wire(const mt_schedule_desc *d, mt_dtype wdt) {
    return d->grad_wire_f32 ? MT_F32 : wdt;
}
// The streams that carry weights in and gradients out.
static inline mt_stream_id mt_schedule_h2d_stream(const mt_schedule_desc *d) {
    return d->serial_link ? MT_STREAM_COMPUTE : MT_STREAM_H2D;
}
static inline mt_stream_id mt_schedule_d2h_stream(const mt_schedule_desc *d) {
    return d->serial_link || d->grads_on_compute ? MT_STREAM_COMPUTE : MT_STREAM_D2H;
}

#endif
