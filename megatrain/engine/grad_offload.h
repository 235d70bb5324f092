// grad_offload.h: the gradients' way off the device. Two device buffers take
// the layers' gradients in turn, the embedding and head have their own; each
// unit's gradients leave on the D2H stream (cast to the wire dtype first when
// the schedule sends f32) into the drain's pinned slabs (grad_drain.h), and
// the drain accumulates them into the host gradients and takes each unit's
// sum of squares for the global norm. With --grad-accum-dtype f32 it also owns
// the f32 buffer chunked weight gradients are summed in.
#ifndef MT_GRAD_OFFLOAD_H
#define MT_GRAD_OFFLOAD_H

#include "engine/grad_drain.h"
#include "engine/traced_copy.h"
#include "engine/parts.h"

typedef struct mt_grad_offload mt_grad_offload;

mt_part_bytes mt_grad_offload_bytes(const mt_engine_shape *sh);
mt_status mt_grad_offload_create(const mt_engine_shape *sh, mt_model *m, mt_traced_copy *lk, mt_devmem *dm,
                                 mt_grad_offload **out);
void mt_grad_offload_destroy(mt_grad_offload *g);

// The next of the two layer-gradient buffers, once the compute stream may overwrite it.
mt_status mt_grad_offload_layer_buffer(mt_grad_offload *g, void **buf, int *slot);
// The compute stream waits until the head's and the embedding's gradients have left.
mt_status mt_grad_offload_resident_free(mt_grad_offload *g);
void *mt_grad_offload_embed(const mt_grad_offload *g);
// The f32 buffer a weight gradient computed in token chunks is summed in before its
// one rounding (--grad-accum-dtype f32): the head and each layer's MLP use it in
// turn, never at once. NULL when gradients are summed in their own dtype.
float *mt_grad_offload_sum(const mt_grad_offload *g);
void *mt_grad_offload_head(const mt_grad_offload *g);
// Layer `layer`'s gradients (in buffer `slot`) leave for the host; micro-batch mb of G.
mt_status mt_grad_offload_send_layer(mt_grad_offload *g, int layer, int slot, int mb);
// The embedding's (unit 0) or the head's (last unit) gradients leave for the host.
mt_status mt_grad_offload_send_resident(mt_grad_offload *g, int unit_index, int mb);
// --gpus N: this rank's gradients go through the collective c as rank `rank`, and a
// unit's finality (its sum of squares, the speculative step's hook) is the leader's,
// rank 0's offload, whichever rank's drain lands the unit last. Before the first step.
void mt_grad_offload_join(mt_grad_offload *g, mt_collective *c, int rank, mt_grad_offload *leader);
// Also tells fn when a unit's gradients are final (the drain thread calls it; set before the first step).
void mt_grad_offload_on_final(mt_grad_offload *g, mt_drain_final_fn fn, void *ctx);
// The units the device updates (device_optimizer.h; NULL: none): their gradients are summed
// and squared on the device, never sent. Before the first step.
struct mt_devopt;
void mt_grad_offload_set_devopt(mt_grad_offload *g, struct mt_devopt *d);
// After the step's last send: waits for every drain of this offload (a rank's, --gpus N).
mt_status mt_grad_offload_drained(mt_grad_offload *g, double *wait_ms);
// After the step's last send: waits for every drain. *wait_ms: host time spent
// waiting for slabs and drains; *sumsq: the squared global norm (units in order).
mt_status mt_grad_offload_finish(mt_grad_offload *g, double *wait_ms, double *sumsq);
// Unit u's sum of squares as its last landing gave it (a sliced host's: its slice's).
double mt_grad_offload_unit_sumsq(const mt_grad_offload *g, int unit);

#endif
