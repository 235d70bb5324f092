// collective.c: which collective a run of N ranks uses: the backend's own (its registry
// row's, cuda's NCCL) with the engine landing its parts, else the host's sum in rank order.
#include "engine/collective.h"

mt_status mt_collective_create(mt_backend **bes, int n_ranks, int n_units, mt_collective **out) {
    *out = NULL;
    mt_device_collective *dc = NULL;
    mt_status s = mt_backend_device_collective(bes, n_ranks, &dc);
    if (s == MT_OK && !dc) return mt_collective_host_create(n_ranks, n_units, out);
    if (s == MT_OK) return mt_collective_device_create(dc, n_units, out);
    if (dc) dc->destroy(dc); // what was made (communicators included)
    return s;
}

void mt_collective_destroy(mt_collective *c) {
    if (c) c->destroy(c);
}
