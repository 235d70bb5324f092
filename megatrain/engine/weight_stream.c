// weight_stream.c: moving layer weights onto the device along the step's plan
// (plan.c): loads on the H2D stream ahead of use, bounded by the ring of
// weight buffers (and, under zero3, by the prefetch bucket); each load waits
// only for its own layer's optimizer update and for its buffer to be free.
#include "engine/engine_internal.h"

// Weight loads are issued piece by piece: one piece per layer, except under
// zero3, which fetches each submodule (norm, qkv, o, norm, gate+up, down) as
// its own copy, as DeepSpeed's per-module parameter fetch does.
static void piece_range(const mt_engine *e, int piece, size_t *off, size_t *n) {
    *off = e->pieces[piece];
    *n = e->pieces[piece + 1] - e->pieces[piece];
}

static mt_status issue_piece(mt_engine *e, mt_step_stats *st) {
    const mt_plan_entry *p = &e->plan[e->issued];
    if (!p->load) {
        e->issued++;
        return MT_OK;
    }
    const mt_backend_ops *o = e->be->ops;
    size_t ws = mt_dtype_size(e->m->wdt), off, n;
    mt_unit *u = mt_model_layer(e->m, p->layer);
    if (e->issued_piece == 0) {
        st->opt_wait_ms += mt_opt_worker_wait_unit(e->opt, MT_UNIT_OF_LAYER(p->layer));
        MT_TRY(o->stream_wait(e->be, e->h2d, e->ev_free[p->buf]));
        MT_TRY(mt_trace_begin_lane(e->trace, e->h2d, MT_LANE_H2D, "weights in", p->layer, &e->load_span));
    }
    piece_range(e, e->issued_piece, &off, &n);
    MT_TRY(o->copy(e->be, (char *)e->wbuf[p->buf] + off * ws, (char *)u->param + off * ws, n * ws, MT_COPY_H2D, e->h2d));
    e->h2d_bytes += (double)(n * ws);
    if (++e->issued_piece == e->n_pieces) {
        MT_TRY(mt_trace_end(e->trace, e->load_span));
        MT_TRY(o->event_record(e->be, e->ev_loaded[p->buf], e->h2d));
        e->issued_piece = 0;
        e->issued++;
    }
    return MT_OK;
}

// Elements already issued for plan entries after `upto` (zero3's bucket accounting).
static long long elems_ahead(const mt_engine *e, int upto) {
    long long n = 0;
    for (int i = upto + 1; i <= e->issued && i < e->n_plan; i++) {
        if (!e->plan[i].load) continue;
        int pieces = i < e->issued ? e->n_pieces : e->issued_piece;
        n += (long long)(e->pieces[pieces] - e->pieces[0]);
    }
    return n;
}

// Issues every load the compute of entry `upto` needs, then prefetches ahead:
// up to `lookahead` entries (the ring), and under zero3 no more than the
// prefetch bucket's worth of elements.
static mt_status issue_loads(mt_engine *e, int upto, mt_step_stats *st) {
    while (e->issued <= upto) MT_TRY(issue_piece(e, st));
    long long budget = e->s.prefetch_elems >= 0 ? e->s.prefetch_elems - elems_ahead(e, upto) : -1;
    while (e->issued < e->n_plan && e->issued <= upto + e->lookahead) {
        if (budget >= 0 && e->plan[e->issued].load) {
            size_t off, n;
            piece_range(e, e->issued_piece, &off, &n);
            if ((long long)n > budget) break;
            budget -= (long long)n;
        }
        MT_TRY(issue_piece(e, st));
    }
    return MT_OK;
}

// Makes plan entry `idx` (which must use layer `layer`) ready on the compute stream.
mt_status mt_weights_acquire(mt_engine *e, int idx, int layer, mt_layer_view *w, mt_step_stats *st) {
    if (idx >= e->n_plan || e->plan[idx].layer != layer)
        return mt_fail(MT_ERR_BACKEND, "internal: weight plan out of step at entry %d (layer %d)", idx, layer);
    MT_TRY(issue_loads(e, idx, st));
    MT_TRY(e->be->ops->stream_wait(e->be, MT_STREAM_COMPUTE, e->ev_loaded[e->plan[idx].buf]));
    void *weights = e->wbuf[e->plan[idx].buf];
    if (e->template_buf) { // ablation: a device-to-device copy into the template, as the official code binds
        size_t bytes = e->m->lay_layer.numel * mt_dtype_size(e->m->wdt);
        MT_TRY(e->be->ops->copy(e->be, e->template_buf, weights, bytes, MT_COPY_D2D, MT_STREAM_COMPUTE));
        weights = e->template_buf;
    }
    mt_layer_bind(&e->m->lay_layer, weights, e->m->wdt, w); // pointer arithmetic only
    return MT_OK;
}

mt_status mt_weights_release(mt_engine *e, int idx) {
    return e->be->ops->event_record(e->be, e->ev_free[e->plan[idx].buf], MT_STREAM_COMPUTE);
}

// Copies a resident unit (embedding or head) to the device once per step.
mt_status mt_weights_load_resident(mt_engine *e, mt_unit *u, void *dst, mt_event *ev, int unit_index, mt_step_stats *st) {
    const mt_backend_ops *o = e->be->ops;
    st->opt_wait_ms += mt_opt_worker_wait_unit(e->opt, unit_index);
    size_t bytes = u->lay->numel * mt_dtype_size(e->m->wdt);
    int span;
    MT_TRY(mt_trace_begin_lane(e->trace, e->h2d, MT_LANE_H2D, unit_index == 0 ? "embedding in" : "head in", -1, &span));
    MT_TRY(o->copy(e->be, dst, u->param, bytes, MT_COPY_H2D, e->h2d));
    MT_TRY(mt_trace_end(e->trace, span));
    e->h2d_bytes += (double)bytes;
    MT_TRY(o->event_record(e->be, ev, e->h2d));
    return o->stream_wait(e->be, MT_STREAM_COMPUTE, ev);
}
