// checkpoints.c: layer-boundary checkpoints, on the device (ckpt[j]) or
// offloaded: checkpoint j lives in pinned host memory and, while in use, in
// device slot j % 3. Forward streams each one out as soon as it is written;
// backward streams block j-1's back in while block j computes. The last three
// stay in their slots across the turn from forward to backward (no reload).
#include "engine/engine_internal.h"

#define CK_SLOTS MT_CKPT_SLOTS

void *mt_ckpt_dev(mt_engine *e, int j) { return e->ck_offload ? e->ck_dev[j % CK_SLOTS] : e->ckpt[j]; }

// Before checkpoint j is written in forward: its slot's previous tenant must be out.
mt_status mt_ckpt_before_write(mt_engine *e, int j) {
    if (!e->ck_offload) return MT_OK;
    return e->be->ops->stream_wait(e->be, MT_STREAM_COMPUTE, e->ev_ck_free[j % CK_SLOTS]);
}

// After checkpoint j's producer is enqueued: copy it out on the D2H stream.
mt_status mt_ckpt_after_write(mt_engine *e, int j) {
    if (!e->ck_offload) return MT_OK;
    const mt_backend_ops *o = e->be->ops;
    int k = j % CK_SLOTS, span;
    size_t bytes = (size_t)e->d.N * e->d.C * e->act_size;
    MT_TRY(o->event_record(e->be, e->ev_ck_ready, MT_STREAM_COMPUTE));
    MT_TRY(o->stream_wait(e->be, e->d2h, e->ev_ck_ready));
    MT_TRY(mt_trace_begin_lane(e->trace, e->d2h, MT_LANE_D2H, "checkpoint out", j, &span));
    MT_TRY(o->copy(e->be, e->ck_host[j], e->ck_dev[k], bytes, MT_COPY_D2H, e->d2h));
    MT_TRY(mt_trace_end(e->trace, span));
    e->d2h_bytes += (double)bytes;
    MT_TRY(o->event_record(e->be, e->ev_ck_out[k], e->d2h));
    return o->event_record(e->be, e->ev_ck_free[k], e->d2h);
}

// Backward: starts bringing checkpoint j back into its slot (no-op when still there).
mt_status mt_ckpt_prefetch(mt_engine *e, int j) {
    if (!e->ck_offload || j < 0 || j >= e->n_ckpt - CK_SLOTS) return MT_OK;
    const mt_backend_ops *o = e->be->ops;
    int k = j % CK_SLOTS, span;
    size_t bytes = (size_t)e->d.N * e->d.C * e->act_size;
    MT_TRY(o->stream_wait(e->be, e->h2d, e->ev_ck_free[k])); // the slot's last reader is done
    MT_TRY(o->stream_wait(e->be, e->h2d, e->ev_ck_out[k]));  // and its forward copy-out
    MT_TRY(mt_trace_begin_lane(e->trace, e->h2d, MT_LANE_H2D, "checkpoint in", j, &span));
    MT_TRY(o->copy(e->be, e->ck_dev[k], e->ck_host[j], bytes, MT_COPY_H2D, e->h2d));
    MT_TRY(mt_trace_end(e->trace, span));
    e->h2d_bytes += (double)bytes;
    return o->event_record(e->be, e->ev_ck_in[k], e->h2d);
}

// Backward: block j's checkpoint must be in its slot before compute reads it.
mt_status mt_ckpt_acquire(mt_engine *e, int j) {
    if (!e->ck_offload || j >= e->n_ckpt - CK_SLOTS) return MT_OK;
    return e->be->ops->stream_wait(e->be, MT_STREAM_COMPUTE, e->ev_ck_in[j % CK_SLOTS]);
}

mt_status mt_ckpt_release(mt_engine *e, int j) {
    if (!e->ck_offload) return MT_OK;
    return e->be->ops->event_record(e->be, e->ev_ck_free[j % CK_SLOTS], MT_STREAM_COMPUTE);
}
