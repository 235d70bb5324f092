// device_collective.h: a backend's own way for N ranks (one backend per device) to reduce
// a unit's gradient on the devices (--gpus N; cuda: NCCL). Only the device side: which part
// of the reduced gradient each rank then carries to the host, and landing it there, are the
// engine's (engine/collective.h). A backend offers one through its registry row's `collective`.
#ifndef MT_DEVICE_COLLECTIVE_H
#define MT_DEVICE_COLLECTIVE_H

#include <stddef.h>

#include "backend/backend.h"

typedef struct mt_device_collective mt_device_collective;
struct mt_device_collective {
    const char *name; // "nccl", for messages
    int n_ranks;
    // Makes the rank's device current on the calling thread (NULL: nothing to do).
    mt_status (*bind)(mt_device_collective *c, int rank);
    // Once stream s of the rank's backend has made dev_grad (n elements of t) complete: reduces
    // it with the other ranks' in place, off stream s (s is not held: it runs on), and records
    // `ready` where the reduced part [*off, *off + *count), the one this rank carries, may be
    // read. Every rank calls it for the same units in the same order.
    mt_status (*reduce)(mt_device_collective *c, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                        mt_stream_id s, mt_event *ready, size_t *off, size_t *count);
    // A rank failed: whatever waits on the devices for it ends (with errors); nothing reduces after.
    void (*abort)(mt_device_collective *c);
    void (*destroy)(mt_device_collective *c);
};

// The device collective the backends' kind offers for n_ranks of them (one per device;
// their registry row's), or *out NULL where it has none (the host sums).
mt_status mt_backend_device_collective(mt_backend **bes, int n_ranks, mt_device_collective **out);

#endif
