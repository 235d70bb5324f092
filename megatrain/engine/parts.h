// parts.h: what the engine's parts share. Each part (weight ring, checkpoint store, gradient offload,
// activations, optimizer worker) says its bytes from the plan inputs alone, mt_<part>_bytes(shape), and
// mt_<part>_create allocates exactly that (checked), so the memory plan is their sum (footprint.c).
#ifndef MT_PARTS_H
#define MT_PARTS_H

#include <stddef.h>

#include "engine/engine.h"
#include "engine/layer.h"
#include "model/layout.h"

// The plan inputs: the model's shape, the precision, the resolved schedule
// and the run's sizes. Everything a part's bytes depend on, and nothing else.
typedef struct {
    mt_config c;
    mt_precision prec;
    mt_dtype wdt, act, wire; // weights and their gradients; activations; gradients on the link
    size_t wdt_elem_bytes, act_elem_bytes; // one element of the weights; of the activations
    mt_dims d;               // B, T, N, C, ... (no device pointers)
    int L, G, grad_slabs, keep_trace;
    mt_unit_layout lay_embed, lay_layer, lay_head; // as the model's (model/layout.h)
    mt_schedule_desc s;      // resolved; s.offload_checkpoints resolved to 0 or 1 (mt_engine_shape_init)
    int n_ckpt;              // layer inputs kept: every K-th (L when activations are kept)
    int n_acts;              // layer-internals sets: 1, or L when activations are kept
    int chunk_rows;          // loss-head rows per chunk (mt_engine_shape_init says how many)
    size_t x_bytes;          // one (N, C) activation, allocation-rounded
    size_t slab_elems;       // the largest unit: what one gradient slab holds
    int spec_window;         // speculative step: the units, counted in the order their gradients become final
                             // (layer L-1 .. 0, embedding; never the head), that have spare state blocks and so may be
                             // updated under the backward; as many as the host plan has room for (0: off)
    size_t rows_cap;         // --embedding-rows-first: the most rows of the embedding a step's forward may read
                             // and still be updated first and staged (optimizer_worker.h); 0: off
    int grad_sum_f32;        // resolved --grad-accum-dtype: chunked weight gradients summed in f32 (fp32: always)
    size_t grad_sum_elems;   // their f32 device buffer (grad_offload.h), 0 when none is needed
    int f32_kernels;         // the backend computes on real data in f32 only (no MT_CAP_BF16: cpu): its kernels
                             // keep f32 scratch beside the parts (mt_kernel_scratch_bytes)
} mt_engine_shape;

// Shape of a run on a backend with capabilities `caps` (0: no backend, what the
// configuration needs). offload_checkpoints = -1 (auto) is resolved against
// device_free (0 = unknown: keep them on the device) with the loss-head chunk at
// its floor; where the backend's memory is a device's (MT_CAP_DEVICE_MEMORY) the
// chunk then grows into what the other parts leave of device_free. grad_sum AUTO
// is resolved after the offload: f32 unless its buffer makes the plan exceed device_free.
void mt_engine_shape_init(mt_engine_shape *sh, const mt_config *c, mt_precision p, mt_dtype act,
                          const mt_engine_opts *o, size_t device_free, unsigned caps);
// head.c: rows per loss-head chunk for `budget_bytes` of logits: at least floor_rows, at most N.
int mt_head_chunk_rows(int N, int V, size_t act_size, size_t budget_bytes, int floor_rows);

// The host model state (host_state.h) as a part: every unit's blocks, the link
// side page-locked when the schedule pins it.
mt_part_bytes mt_host_state_bytes(const mt_engine_shape *sh);
// The scratch an f32-only backend's kernels grow and keep (device bytes; 0 elsewhere), footprint.c.
mt_part_bytes mt_kernel_scratch_bytes(const mt_engine_shape *sh);

// Device checkpoint slots when checkpoints are offloaded: one being written, one
// streaming out (forward) or in (backward), one being read.
#define MT_CKPT_SLOTS 3

// Every device allocation is rounded up to this (the plan counts the same).
#define MT_DEV_ALIGN 256
static inline size_t mt_dev_round(size_t bytes) {
    return bytes ? (bytes + MT_DEV_ALIGN - 1) / MT_DEV_ALIGN * MT_DEV_ALIGN : MT_DEV_ALIGN;
}

// The device memory of one engine: allocations remembered for destroy and
// tallied, so a part can check that it allocated what it planned.
typedef struct {
    mt_backend *be;
    void **ptrs;
    int n, cap;
    size_t bytes; // allocated so far
} mt_devmem;

mt_status mt_devmem_alloc(mt_devmem *dm, size_t bytes, void **out);
void mt_devmem_free_all(mt_devmem *dm);
// After a part's create: `allocated` must equal `planned` (an internal error names the part).
mt_status mt_part_check(const char *part, size_t planned, size_t allocated);

#endif
