// collective.h: how N data-parallel ranks' gradients of one unit become the one host gradient
// (--gpus N). host (collective_host.c): every rank lands the whole unit and the host adds in one fixed
// order, so N ranks are bitwise one rank's run. device (collective_device.c, the backend's reduce-scatter):
// each rank lands its 1/N of the reduced unit, so the link carries each byte once. Either way the unit's
// sum of squares goes to one on-final hook: the norm, clip and skip are one decision for all ranks.
#ifndef MT_COLLECTIVE_H
#define MT_COLLECTIVE_H

#include "backend/backend.h"
#include "backend/device_collective.h"
#include "engine/host_state.h"

typedef struct mt_collective mt_collective;

// One rank's part of one unit's gradient, on its drain thread, ready in `slab`
// (count elements of `wire`; the values are the unit's [off, off + count)).
typedef struct {
    mt_unit *u;
    int unit, rank, mb, G; // unit index; rank; micro-batch mb of G
    mt_dtype wdt, wire;
    void *slab;
    size_t off, count;
} mt_landing;

struct mt_collective {
    const char *name; // "host" or the device collective's ("nccl"), for messages
    int n_ranks;
    // Makes the rank's device current on the calling thread (NULL: nothing to do).
    mt_status (*bind)(mt_collective *c, int rank);
    // Device side, once stream s of the rank's backend has made dev_grad (n elements of t)
    // complete: reduces it with the other ranks' if the collective does so on the devices
    // (off stream s, which runs on), records `ready` where the part may be read, and says
    // which part [*off, *off + *count) this rank carries to the host.
    mt_status (*reduce)(mt_collective *c, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                        mt_stream_id s, mt_event *ready, size_t *off, size_t *count);
    // Host side: lands the part in u->grad through the host work h (copy on the step's
    // first contribution, add after). Returns 1 when the unit is now final, with *sumsq
    // the sum of squares of the whole reduced gradient.
    int (*land)(mt_collective *c, const mt_host_work *h, const mt_landing *l, double *sumsq);
    // A rank failed mid-step: every landing waiting for it returns at once, landing nothing,
    // so the other ranks' walks end and the step can report the failure instead of hanging.
    // The collective stays aborted (the run ends). NULL: nothing waits on the host.
    void (*abort)(mt_collective *c);
    void (*destroy)(mt_collective *c);
};

// The collective for N ranks on these backends (one per rank, all of one kind): the device
// collective the backends' registry row offers (cuda: NCCL, refused with a hint in a build
// without nccl.h), else the host sum (cpu: device memory is host memory). n_units: the model's units.
mt_status mt_collective_create(mt_backend **bes, int n_ranks, int n_units, mt_collective **out);
void mt_collective_destroy(mt_collective *c);

mt_status mt_collective_host_create(int n_ranks, int n_units, mt_collective **out);
// Lands the disjoint parts a device collective leaves each rank; takes dc (destroyed with it).
mt_status mt_collective_device_create(mt_device_collective *dc, int n_units, mt_collective **out);

// Several hosts, one rank each, the gradients sliced (host_state.h mt_state_slice): each unit's
// micro-batch reduce-scattered on the drain thread as it lands (collective_hosts.c); u->grad then
// holds this host's slice of the sum only, and the on-final sum of squares is that slice's.
struct mt_hosts;
mt_status mt_collective_hosts_create(struct mt_hosts *hosts, mt_collective **out);
// The first failed sum, once the drains are done (MT_OK: none).
mt_status mt_collective_hosts_status(const mt_collective *c);

#endif
