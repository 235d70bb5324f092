// collective_hosts.c: the sum across hosts, unit by unit and micro-batch by micro-batch, as the
// gradients arrive (one rank per host, the state sliced with its gradients: host_state.h).
// Each micro-batch's whole unit lands in a slab, which the drain thread reduce-scatters at once
// (hosts.h reduce_scatter_add): the owner adds the hosts' contributions to its slice in host
// order, micro-batch after micro-batch, so its slice is built exactly as one process's --gpus H
// builds it from G micro-batches of H ranks (collective_host.c), and no host keeps more of a
// gradient than its slice and the slabs in flight. The sum runs under the next units' backward.
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend_call.h"
#include "engine/collective.h"
#include "engine/host_shard.h"
#include "engine/hosts.h"
#include "optim/grad_ops.h"

typedef struct {
    mt_collective base;
    mt_hosts *hosts;
    mt_status error; // the first failed sum (the drain has no way to say it: the step asks)
    char error_msg[1024];
} hosts_coll;

static mt_status hosts_reduce(mt_collective *c, int rank, mt_backend *be, void *dev_grad, mt_dtype t, size_t n,
                              mt_stream_id s, mt_event *ready, size_t *off, size_t *count) {
    (void)c, (void)rank, (void)dev_grad, (void)t;
    *off = 0; // the whole unit crosses the link; the hosts split it
    *count = n;
    return mt_backend_event_record(be, ready, s);
}

static int hosts_land(mt_collective *c, const mt_host_work *h, const mt_landing *l, double *sumsq) {
    (void)h;
    hosts_coll *hc = (hosts_coll *)c;
    if (hc->error != MT_OK) return 0; // the run ends at the step's check
    if (l->wire != l->wdt) mt_convert(l->slab, l->wdt, l->slab, l->wire, l->count); // exact: bf16 values
    mt_status s = hc->hosts->reduce_scatter_add(hc->hosts, l->slab, l->u->grad, l->wdt, l->count, l->mb == 0);
    if (s != MT_OK) {
        hc->error = s;
        snprintf(hc->error_msg, sizeof hc->error_msg, "%s", mt_last_error());
        return 0;
    }
    if (l->mb != l->G - 1) return 0;
    size_t off, cnt;
    mt_host_shard_range(l->count, hc->hosts->n, hc->hosts->rank, &off, &cnt);
    *sumsq = mt_grad_sumsq((char *)l->u->grad + off * mt_dtype_size(l->wdt), l->wdt, cnt); // this host's slice
    return 1;
}

static void hosts_destroy(mt_collective *c) { free(c); }

mt_status mt_collective_hosts_create(mt_hosts *hosts, mt_collective **out) {
    *out = NULL;
    if (!hosts->reduce_scatter_add)
        return mt_fail(MT_ERR_UNSUPPORTED, "several hosts: this MPI gives one thread only, so the hosts' sum cannot "
                                           "run beside the backward");
    hosts_coll *hc = calloc(1, sizeof *hc);
    if (!hc) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the hosts' sum");
    hc->base = (mt_collective){.name = "hosts", .n_ranks = 1, .reduce = hosts_reduce, .land = hosts_land,
                               .destroy = hosts_destroy};
    hc->hosts = hosts;
    *out = &hc->base;
    return MT_OK;
}

mt_status mt_collective_hosts_status(const mt_collective *c) {
    const hosts_coll *hc = (const hosts_coll *)c;
    return hc->error == MT_OK ? MT_OK : mt_fail(hc->error, "%s", hc->error_msg);
}
