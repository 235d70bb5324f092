// grad_drain.h: gradients leave the device through a pool of pinned host slabs, drained by one host
// thread in arrival order into the units' host gradients (copy on the first micro-batch, add after; the
// unit's sum of squares on the last), so the per-unit order needs no locks and the device keeps computing.
#ifndef MT_GRAD_DRAIN_H
#define MT_GRAD_DRAIN_H

#include "backend/backend.h"
#include "engine/collective.h"
#include "engine/host_state.h"
#include "engine/traced_copy.h"

typedef struct mt_drain mt_drain;

// The copies go through `lk` (traced on the D2H lane, counted); the drains are
// the host work `h` (real or priced) and traced too.
mt_status mt_drain_create(mt_backend *be, mt_traced_copy *lk, const mt_host_work *h, int n_slabs, size_t slab_bytes,
                          mt_drain **out);
void mt_drain_destroy(mt_drain *d);

// One unit's gradients leaving the device.
typedef struct {
    mt_unit *u;
    int unit;               // its index in the model
    mt_dtype wdt;           // type of the host gradients
    const void *dev_grad;   // u->lay->numel elements on the device
    mt_dtype wire;          // type that crosses the link (f32 when the schedule offloads fp32 grads)
    mt_event *ready;        // recorded on the compute stream when dev_grad is complete
    mt_event *dev_free;     // recorded after the copy: dev_grad may be overwritten (may be NULL)
    mt_stream_id stream;    // stream that carries the copy (D2H, or compute for the naive schedule)
    int first, last;        // first / last micro-batch of the step
    int direct;             // copy straight into u->grad (first micro-batch, wire = wdt, u->grad
                            // pinned): no slab copy on the host, only the sum of squares
    int mb, G;              // micro-batch mb of G (what a collective orders by)
    size_t off, count;      // the part of the unit that crosses: elements [off, off + count) (dev_grad
                            // points at element off); the whole unit (0, numel) for one rank
} mt_offload;

// Queues: `stream` waits `ready`, copies dev_grad into a free slab (or, direct,
// into u->grad; the slab's event still orders the drain), records `dev_free`; the
// drain thread converts (link type -> host type, exact) and accumulates the slab
// into u->grad.
mt_status mt_drain_offload(mt_drain *d, const mt_offload *o);
// Called on the drain thread when a unit's gradients are final in host memory
// (its last micro-batch accumulated), with their sum of squares: where the
// global norm is gathered, and where an update could start early.
typedef void (*mt_drain_final_fn)(void *ctx, int unit, double sumsq);
void mt_drain_on_final(mt_drain *d, mt_drain_final_fn fn, void *ctx);
// --gpus N: this drain is rank `rank`'s and lands its slabs through the collective
// (engine/collective.h) instead of adding them itself; set before the first offload.
void mt_drain_set_collective(mt_drain *d, mt_collective *c, int rank);
// Waits until every queued drain finished; returns the first error a drain met.
mt_status mt_drain_wait_all(mt_drain *d);
// Milliseconds (the host work's clock) the caller spent waiting for a free slab since the last call.
double mt_drain_take_wait_ms(mt_drain *d);

#endif
