// weight_ring.h: the layer weights on the device. A ring of device buffers
// (or, when weights are resident, one buffer per layer) serves the step's
// weight uses in order (weight_uses.c: forward 0..L-1, then per checkpoint
// block its recompute and its backward); loads run on the H2D stream ahead of
// the compute, as far as the ring (and a prefetch budget) allows, each waiting
// only for its own layer's optimizer update and its buffer to be free. The
// embedding and head weights stay on the device and load once per step.
#ifndef MT_WEIGHT_RING_H
#define MT_WEIGHT_RING_H

#include "engine/traced_copy.h"
#include "engine/optimizer_worker.h"
#include "engine/parts.h"

// One use of a layer's weights on the device during a step.
typedef struct {
    int layer;
    int buf;  // device buffer
    int load; // 1 = copy the weights in first; 0 = already there
} mt_weight_use;

typedef struct mt_weight_ring mt_weight_ring;

mt_part_bytes mt_weight_ring_bytes(const mt_engine_shape *sh);
mt_status mt_weight_ring_create(const mt_engine_shape *sh, mt_model *m, mt_traced_copy *lk, mt_opt_worker *opt,
                                mt_devmem *dm, mt_weight_ring **out);
void mt_weight_ring_destroy(mt_weight_ring *r);

// The units the device updates (device_optimizer.h; NULL: none): their weights are copied in
// from the device's copy, device to device. Before the first step.
struct mt_devopt;
void mt_weight_ring_set_devopt(mt_weight_ring *r, const struct mt_devopt *d);
// A new pass over the uses (a step, or an eval).
void mt_weight_ring_rewind(mt_weight_ring *r);
int mt_weight_ring_n_uses(const mt_weight_ring *r);
// Use `idx` (which must be of layer `layer`) ready on the compute stream, the template bound to it.
mt_status mt_weight_ring_acquire(mt_weight_ring *r, int idx, int layer, mt_layer_ptrs *w);
// The compute of use `idx` is enqueued: its buffer is free once that has run.
mt_status mt_weight_ring_release(mt_weight_ring *r, int idx);
// The embedding (unit 0) or head (last unit) copied in after its update; the compute stream waits for it.
mt_status mt_weight_ring_load_resident(mt_weight_ring *r, int unit_index);
// The first layer's load, issued now if its update is published already (a kept speculative
// update): its copy then runs while the embedding's rows are updated (rows first).
mt_status mt_weight_ring_load_first_if_kept(mt_weight_ring *r);
// The embedding before a forward over n ids (embed_rows.h): only their rows, compact, when
// rows first staged them (*used 1: the lookup reads compact[i] for ids[i]); else the whole.
mt_status mt_weight_ring_load_embedding(mt_weight_ring *r, const int32_t *ids, size_t n, int32_t *compact, int *used);
// The next step's ids, kept for the optimizer pass before it, and handed to that pass as it
// starts (embed_rows.h; nothing when rows first is off).
void mt_weight_ring_announce(mt_weight_ring *r, const int32_t *const *spans, int n_spans, size_t span_len);
void mt_weight_ring_hand_over_rows(mt_weight_ring *r);
// Waits for unit's whole update (counted with the loads' waits).
double mt_weight_ring_wait_update(mt_weight_ring *r, int unit);
void *mt_weight_ring_embed(const mt_weight_ring *r);
void *mt_weight_ring_head(const mt_weight_ring *r);
// Host milliseconds the loads waited for optimizer updates since the last call.
double mt_weight_ring_take_opt_wait(mt_weight_ring *r);

// weight_uses.c: the step's uses in order, G micro-batches of them (*n set); caller frees.
mt_status mt_weight_uses_build(const mt_engine_shape *sh, mt_weight_use **out, int *n);

#endif
