// device_optimizer.h: the GPU's share of the optimizer (--device-optimizer auto|off|N): a few whole
// units (the embedding and head first, then layers in forward order) keep their optimizer state on the
// device and are updated there, bitwise as the host would, so nothing of them crosses the link while
// training. The host blocks stay the checkpoint's source (copied in at create, out before a save), so the
// files and a resume are the same whatever the split.
#ifndef MT_DEVICE_OPTIMIZER_H
#define MT_DEVICE_OPTIMIZER_H

#include "engine/host_state.h"

// --device-optimizer: MT_DEVOPT_AUTO, MT_DEVOPT_OFF (today's engine), or N units.
enum { MT_DEVOPT_AUTO = -1, MT_DEVOPT_OFF = 0 };
mt_status mt_devopt_parse(const char *s, int *out); // "auto", "off", or a count >= 0

// Device bytes for one unit's share: weights and gradient sum (wdt), m and v, the master.
size_t mt_devopt_unit_bytes(const mt_unit_layout *lay, mt_precision p);
// The units in the order the split takes them: embedding, head, layers 0 .. L-1 (order[k]
// a unit index; n_units = L + 2).
void mt_devopt_order(int L, int *order);
// The split: on[u] = 1 for the units updated on the device. want: N, or MT_DEVOPT_AUTO for
// as many as `spare_bytes` holds (taken in mt_devopt_order, skipping none: a unit that does
// not fit ends the list). Returns the count; *bytes the device bytes they take.
int mt_devopt_choose(const mt_config *c, mt_precision p, int want, size_t spare_bytes, unsigned char *on,
                     size_t *bytes);

typedef struct mt_devopt mt_devopt;

// The chosen units' device state, copied in from the host state (NULL *out when none chosen).
// `stream`: where the updates and the copies in and out run (the weight ring's load stream).
mt_status mt_devopt_create(mt_model *m, mt_backend *be, const unsigned char *on, mt_stream_id stream,
                           mt_devopt **out);
void mt_devopt_destroy(mt_devopt *d);
// THE predicate: whether unit u is updated on the device (NULL d: never). Kept in one place
// so that a per-host shard of the units (several hosts) combines with it.
int mt_devopt_on_device(const mt_devopt *d, int u);
const unsigned char *mt_devopt_mask(const mt_devopt *d);
int mt_devopt_count(const mt_devopt *d);
size_t mt_devopt_bytes(const mt_devopt *d); // device bytes of the chosen units' state
// Unit u's weights (wdt) and f32 master (NULL without) on the device; NULL for a host unit.
const void *mt_devopt_param(const mt_devopt *d, int u);
const float *mt_devopt_master(const mt_devopt *d, int u);
// Micro-batch mb of G of unit u's gradients, at dev_grad on the compute stream, into its sum
// (a copy on the first, an add after); the last one's sum of squares is taken there too.
mt_status mt_devopt_grad_in(mt_devopt *d, int u, const void *dev_grad, int mb, int G);
// The step's sums of squares of the chosen units into sumsq[u] (the host waits for them).
mt_status mt_devopt_sumsq(mt_devopt *d, double *sumsq);
// The step's update of every chosen unit, enqueued after the norm (nothing under a skip).
mt_status mt_devopt_step(mt_devopt *d, const mt_adamw_hparams *h, float weight_decay, int skip);
// The device state copied out to the units' host blocks (before a save), the host waiting.
mt_status mt_devopt_copy_out(mt_devopt *d);

#endif
