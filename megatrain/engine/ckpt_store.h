// ckpt_store.h: the saved layer inputs (layer-boundary checkpoints): every
// K-th layer's input, or every layer's when activations are kept. They live on
// the device, or, offloaded, in pinned host memory with three device slots:
// checkpoint j uses slot j % 3; forward streams each out as soon as it is
// written, backward streams block j-1's back in while block j computes, and
// the last three stay in their slots across the turn (no reload).
#ifndef MT_CKPT_STORE_H
#define MT_CKPT_STORE_H

#include "engine/traced_copy.h"
#include "engine/parts.h"

typedef struct mt_ckpt_store mt_ckpt_store;

mt_part_bytes mt_ckpt_store_bytes(const mt_engine_shape *sh);
mt_status mt_ckpt_store_create(const mt_engine_shape *sh, mt_backend *be, mt_traced_copy *lk, mt_devmem *dm,
                               mt_ckpt_store **out);
void mt_ckpt_store_destroy(mt_ckpt_store *ck);

// Checkpoint j's device buffer.
void *mt_ckpt_dev(mt_ckpt_store *ck, int j);
// Offload hooks (no-ops when the checkpoints stay on the device):
mt_status mt_ckpt_before_write(mt_ckpt_store *ck, int j); // forward: the slot's previous tenant is out
mt_status mt_ckpt_after_write(mt_ckpt_store *ck, int j);  // forward: its producer is enqueued; copy it out
mt_status mt_ckpt_prefetch(mt_ckpt_store *ck, int j);     // backward: start bringing it back
mt_status mt_ckpt_acquire(mt_ckpt_store *ck, int j);      // backward: compute waits until it is in
mt_status mt_ckpt_release(mt_ckpt_store *ck, int j);      // backward: its last reader is enqueued

#endif
