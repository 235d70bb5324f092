// grad_drain.h: gradients leave the device through a pool of pinned host
// slabs. The D2H stream copies a unit's device gradients into a free slab; one
// host thread drains slabs, in arrival order, into the unit's host gradients
// (copy on the first micro-batch, add after) and, on the last micro-batch,
// takes the unit's sum of squares for the global norm while the device keeps
// computing. One thread keeps the per-unit order without locks per unit.
#ifndef MT_GRAD_DRAIN_H
#define MT_GRAD_DRAIN_H

#include "backend/backend.h"
#include "engine/host_state.h"

typedef struct mt_drain mt_drain;

mt_status mt_drain_create(mt_backend *be, int n_slabs, size_t slab_bytes, mt_drain **out);
void mt_drain_destroy(mt_drain *d);

// Queues: D2H stream waits `ready`, copies `bytes` of dev_grad into a slab,
// records `dev_free` (the device buffer may be overwritten after it), and the
// drain thread accumulates the slab into u->grad. With `last`, *sumsq receives
// the sum of squares of u->grad once accumulated.
mt_status mt_drain_offload(mt_drain *d, mt_unit *u, mt_dtype wdt, const void *dev_grad, mt_event *ready,
                           mt_event *dev_free, int first, int last, double *sumsq);
// Waits until every queued drain finished; returns the first error a drain met.
mt_status mt_drain_wait_all(mt_drain *d);
// Host milliseconds the caller spent waiting for a free slab since the last call.
double mt_drain_take_wait_ms(mt_drain *d);

#endif
