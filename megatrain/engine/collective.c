// collective.c: which collective a run of N ranks uses: the backend's own (its registry
// row's, cuda's NCCL), else the host's sum in rank order.
#include "engine/collective.h"

mt_status mt_collective_create(mt_backend **bes, int n_ranks, int n_units, mt_collective **out) {
    *out = NULL;
    const mt_backend_entry *e = mt_backend_find(bes[0]->ops->name);
    if (!e || !e->collective) return mt_collective_host_create(n_ranks, n_units, out);
    mt_status s = e->collective(bes, n_ranks, n_units, out);
    if (s != MT_OK) {
        mt_collective_destroy(*out); // what was made (communicators included)
        *out = NULL;
    }
    return s;
}

void mt_collective_destroy(mt_collective *c) {
    if (c) c->destroy(c);
}
