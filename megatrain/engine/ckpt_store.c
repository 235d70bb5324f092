// ckpt_store.c: checkpoints on the device (dev[j]) or offloaded (host[j] plus
// slot j % MT_CKPT_SLOTS on the device).
#include "engine/ckpt_store.h"

#include <stdlib.h>

struct mt_ckpt_store {
    mt_backend *be;
    mt_traced_copy *lk;
    int n, offload;
    size_t bytes;           // one checkpoint: (N, C) activations
    size_t host_bytes;      // its host buffer (allocation-rounded, as planned)
    mt_stream_id h2d, d2h;
    void **dev;             // n device buffers, or MT_CKPT_SLOTS slots when offloaded
    void **host;            // offloaded: n pinned host buffers
    mt_event *ev_free[MT_CKPT_SLOTS], *ev_out[MT_CKPT_SLOTS], *ev_in[MT_CKPT_SLOTS], *ev_ready;
};

mt_part_bytes mt_ckpt_store_bytes(const mt_engine_shape *sh) {
    int off = sh->s.offload_checkpoints;
    size_t host = off ? (size_t)sh->n_ckpt * sh->x_bytes : 0;
    return (mt_part_bytes){.device = (size_t)(off ? MT_CKPT_SLOTS : sh->n_ckpt) * sh->x_bytes, .host = host,
                           .pinned = host};
}

mt_status mt_ckpt_store_create(const mt_engine_shape *sh, mt_backend *be, mt_traced_copy *lk, mt_devmem *dm,
                               mt_ckpt_store **out) {
    mt_ckpt_store *ck = calloc(1, sizeof *ck);
    if (!ck) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the checkpoint store");
    *out = ck;
    ck->be = be;
    ck->lk = lk;
    ck->n = sh->n_ckpt;
    ck->offload = sh->s.offload_checkpoints;
    ck->bytes = (size_t)sh->d.N * sh->d.C * sh->act_elem_bytes;
    ck->host_bytes = sh->x_bytes;
    ck->h2d = mt_schedule_h2d_stream(&sh->s);
    ck->d2h = mt_schedule_d2h_stream(&sh->s);
    int n_dev = ck->offload ? MT_CKPT_SLOTS : ck->n;
    ck->dev = calloc((size_t)n_dev, sizeof *ck->dev);
    if (!ck->dev) return mt_fail(MT_ERR_MEMORY, "host memory: the checkpoint table");
    size_t before = dm->bytes;
    for (int i = 0; i < n_dev; i++) MT_TRY(mt_devmem_alloc(dm, ck->bytes, &ck->dev[i]));
    MT_TRY(mt_part_check("checkpoint store", mt_ckpt_store_bytes(sh).device, dm->bytes - before));
    if (!ck->offload) return MT_OK;
    ck->host = calloc((size_t)ck->n, sizeof *ck->host);
    if (!ck->host) return mt_fail(MT_ERR_MEMORY, "host memory: the checkpoint table");
    for (int i = 0; i < ck->n; i++) MT_TRY(mt_backend_host_alloc(be, ck->host_bytes, &ck->host[i]));
    for (int i = 0; i < MT_CKPT_SLOTS; i++) {
        MT_TRY(mt_backend_event_create(be, &ck->ev_free[i]));
        MT_TRY(mt_backend_event_create(be, &ck->ev_out[i]));
        MT_TRY(mt_backend_event_create(be, &ck->ev_in[i]));
    }
    return mt_backend_event_create(be, &ck->ev_ready);
}

void mt_ckpt_store_destroy(mt_ckpt_store *ck) {
    if (!ck) return;
    mt_backend *be = ck->be;
    for (int i = 0; i < MT_CKPT_SLOTS; i++) {
        mt_event *evs[] = {ck->ev_free[i], ck->ev_out[i], ck->ev_in[i]};
        for (int k = 0; k < 3; k++)
            if (evs[k]) mt_backend_event_destroy(be, evs[k]);
    }
    if (ck->ev_ready) mt_backend_event_destroy(be, ck->ev_ready);
    if (ck->host) {
        for (int i = 0; i < ck->n; i++)
            if (ck->host[i]) mt_backend_host_free(be, ck->host[i], ck->host_bytes);
        free(ck->host);
    }
    free(ck->dev);
    free(ck);
}

#define SLOTS MT_CKPT_SLOTS

void *mt_ckpt_dev(mt_ckpt_store *ck, int j) { return ck->offload ? ck->dev[j % SLOTS] : ck->dev[j]; }

mt_status mt_ckpt_before_write(mt_ckpt_store *ck, int j) {
    if (!ck->offload) return MT_OK;
    return mt_backend_stream_wait(ck->be, MT_STREAM_COMPUTE, ck->ev_free[j % SLOTS]);
}

mt_status mt_ckpt_after_write(mt_ckpt_store *ck, int j) {
    if (!ck->offload) return MT_OK;
    int k = j % SLOTS;
    MT_TRY(mt_backend_event_record(ck->be, ck->ev_ready, MT_STREAM_COMPUTE));
    MT_TRY(mt_backend_stream_wait(ck->be, ck->d2h, ck->ev_ready));
    MT_TRY(mt_traced_copy_one(ck->lk, MT_LANE_D2H, "checkpoint out", j, ck->host[j], ck->dev[k], ck->bytes, MT_COPY_D2H,
                              ck->d2h));
    MT_TRY(mt_backend_event_record(ck->be, ck->ev_out[k], ck->d2h));
    return mt_backend_event_record(ck->be, ck->ev_free[k], ck->d2h);
}

mt_status mt_ckpt_prefetch(mt_ckpt_store *ck, int j) {
    if (!ck->offload || j < 0 || j >= ck->n - SLOTS) return MT_OK;
    int k = j % SLOTS;
    MT_TRY(mt_backend_stream_wait(ck->be, ck->h2d, ck->ev_free[k])); // the slot's last reader is done
    MT_TRY(mt_backend_stream_wait(ck->be, ck->h2d, ck->ev_out[k]));  // and its forward copy-out
    MT_TRY(mt_traced_copy_one(ck->lk, MT_LANE_H2D, "checkpoint in", j, ck->dev[k], ck->host[j], ck->bytes, MT_COPY_H2D,
                              ck->h2d));
    return mt_backend_event_record(ck->be, ck->ev_in[k], ck->h2d);
}

mt_status mt_ckpt_acquire(mt_ckpt_store *ck, int j) {
    if (!ck->offload || j >= ck->n - SLOTS) return MT_OK;
    return mt_backend_stream_wait(ck->be, MT_STREAM_COMPUTE, ck->ev_in[j % SLOTS]);
}

mt_status mt_ckpt_release(mt_ckpt_store *ck, int j) {
    if (!ck->offload) return MT_OK;
    return mt_backend_event_record(ck->be, ck->ev_free[j % SLOTS], MT_STREAM_COMPUTE);
}
