// weight_ring.c: the device weight buffers and the loads that fill them along
// the step's uses (weight_uses.c).
#include "engine/weight_ring.h"

#include <stdlib.h>

#include "engine/device_optimizer.h"
#include "engine/embed_rows.h"

struct mt_weight_ring {
    mt_backend *be;
    mt_model *m;
    mt_traced_copy *lk;
    mt_opt_worker *opt;
    int n_buf;
    void **buf;
    mt_event **ev_loaded, **ev_free;
    void *template_buf;       // copy bind: the one buffer layers are bound to
    void **stage;             // f32 parameter wire: one f32 staging buffer per ring buffer (NULL otherwise)
    double fetch_ms;          // host time a peer's hooks spend per fetch (a piece: submodule or layer)
    void *embed, *head;       // resident units
    mt_event *ev_embed_loaded, *ev_head_loaded;
    mt_embed_rows *rows;      // the embedding's rows first (NULL: off)
    mt_stream_id h2d;
    mt_weight_use *uses;
    int n_uses, issued, lookahead;
    int issued_piece;         // next piece of uses[issued]
    int n_pieces;             // pieces per layer load: 1, one per submodule, or one per update part
    int by_part;              // the pieces are the optimizer's update parts: each waits for its own part
    size_t pieces[MT_MAX_SUBMODULES + 1];
    long long prefetch_elems; // elements loaded ahead of use (-1: the ring alone)
    int load_span;            // trace span of the load in flight
    double opt_wait_ms;
    const struct mt_devopt *devopt; // units whose weights live on the device (device_optimizer.h), or NULL
};

// Parameters cross as f32 and are cast on the device: only where the weights are
// narrower than f32 and an f32 master exists to send (FSDP2's fp32 shards).
static int f32_param_wire(const mt_engine_shape *sh) {
    return sh->s.param_wire_f32 && sh->wdt != MT_F32 && sh->prec == MT_PREC_MIXED;
}

mt_part_bytes mt_weight_ring_bytes(const mt_engine_shape *sh) {
    size_t layer = mt_dev_round(sh->lay_layer.numel * sh->wdt_elem_bytes);
    int n = sh->s.weight_bufs + (sh->s.bind == MT_BIND_COPY ? 1 : 0);
    size_t stage = f32_param_wire(sh) ? (size_t)sh->s.weight_bufs * mt_dev_round(sh->lay_layer.numel * 4) : 0;
    return (mt_part_bytes){.device = (size_t)n * layer + stage +
                                     mt_dev_round(sh->lay_embed.numel * sh->wdt_elem_bytes) +
                                     mt_dev_round(sh->lay_head.numel * sh->wdt_elem_bytes),
                           .host = mt_embed_rows_bytes(sh).host};
}

mt_status mt_weight_ring_create(const mt_engine_shape *sh, mt_model *m, mt_traced_copy *lk, mt_opt_worker *opt,
                                mt_devmem *dm, mt_weight_ring **out) {
    mt_weight_ring *r = calloc(1, sizeof *r);
    if (!r) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the weight ring");
    *out = r;
    r->be = lk->be; // this rank's backend (the model's blocks may be another's)
    r->m = m;
    r->lk = lk;
    r->opt = opt;
    r->n_buf = sh->s.weight_bufs;
    r->h2d = mt_schedule_h2d_stream(&sh->s);
    r->prefetch_elems = sh->s.prefetch_elems;
    r->buf = calloc((size_t)r->n_buf, sizeof *r->buf);
    r->ev_loaded = calloc((size_t)r->n_buf, sizeof *r->ev_loaded);
    r->ev_free = calloc((size_t)r->n_buf, sizeof *r->ev_free);
    if (!r->buf || !r->ev_loaded || !r->ev_free) return mt_fail(MT_ERR_MEMORY, "host memory: the weight ring's tables");
    size_t before = dm->bytes;
    for (int i = 0; i < r->n_buf; i++) {
        MT_TRY(mt_devmem_alloc(dm, sh->lay_layer.numel * sh->wdt_elem_bytes, &r->buf[i]));
        MT_TRY(mt_backend_event_create(r->be, &r->ev_loaded[i]));
        MT_TRY(mt_backend_event_create(r->be, &r->ev_free[i]));
    }
    if (sh->s.bind == MT_BIND_COPY)
        MT_TRY(mt_devmem_alloc(dm, sh->lay_layer.numel * sh->wdt_elem_bytes, &r->template_buf));
    if (f32_param_wire(sh)) {
        if (!(r->stage = calloc((size_t)r->n_buf, sizeof *r->stage)))
            return mt_fail(MT_ERR_MEMORY, "host memory: the weight ring's tables");
        for (int i = 0; i < r->n_buf; i++) MT_TRY(mt_devmem_alloc(dm, sh->lay_layer.numel * 4, &r->stage[i]));
    }
    r->fetch_ms = sh->s.fetch_overhead_ms;
    MT_TRY(mt_devmem_alloc(dm, sh->lay_embed.numel * sh->wdt_elem_bytes, &r->embed));
    MT_TRY(mt_devmem_alloc(dm, sh->lay_head.numel * sh->wdt_elem_bytes, &r->head));
    MT_TRY(mt_part_check("weight ring", mt_weight_ring_bytes(sh).device, dm->bytes - before));
    MT_TRY(mt_backend_event_create(r->be, &r->ev_embed_loaded));
    MT_TRY(mt_backend_event_create(r->be, &r->ev_head_loaded));
    char *table = (char *)r->embed + m->lay_embed.t[MT_T_EMBED].offset * sh->wdt_elem_bytes;
    MT_TRY(mt_embed_rows_create(sh, m, lk, opt, r->h2d, table, &r->rows));
    r->n_pieces = 1;
    r->pieces[0] = 0;
    r->pieces[1] = sh->lay_layer.numel;
    if (sh->s.submodule_fetch) r->n_pieces = mt_layout_submodules(&sh->lay_layer, r->pieces);
    else if (mt_opt_worker_parts(opt) > 1) { // a layer crosses part by part, each as soon as it is updated
        r->by_part = 1;
        r->n_pieces = mt_opt_worker_parts(opt);
        for (int p = 0; p < r->n_pieces; p++)
            mt_update_part(sh->lay_layer.numel, r->n_pieces, p, &r->pieces[p], &r->pieces[p + 1]);
    }
    MT_TRY(mt_weight_uses_build(sh, &r->uses, &r->n_uses));
    r->lookahead = sh->s.weights_resident ? r->n_uses : sh->s.lookahead; // resident: every load up front
    return MT_OK;
}

void mt_weight_ring_destroy(mt_weight_ring *r) {
    if (!r) return;
    for (int i = 0; i < r->n_buf; i++) {
        if (r->ev_loaded && r->ev_loaded[i]) mt_backend_event_destroy(r->be, r->ev_loaded[i]);
        if (r->ev_free && r->ev_free[i]) mt_backend_event_destroy(r->be, r->ev_free[i]);
    }
    if (r->ev_embed_loaded) mt_backend_event_destroy(r->be, r->ev_embed_loaded);
    if (r->ev_head_loaded) mt_backend_event_destroy(r->be, r->ev_head_loaded);
    mt_embed_rows_destroy(r->rows);
    free(r->buf);
    free(r->ev_loaded);
    free(r->ev_free);
    free(r->uses);
    free(r->stage);
    free(r);
}

void mt_weight_ring_set_devopt(mt_weight_ring *r, const struct mt_devopt *d) { r->devopt = d; }

void mt_weight_ring_rewind(mt_weight_ring *r) { r->issued = r->issued_piece = 0; }
int mt_weight_ring_n_uses(const mt_weight_ring *r) { return r->n_uses; }
void *mt_weight_ring_embed(const mt_weight_ring *r) { return r->embed; }
void *mt_weight_ring_head(const mt_weight_ring *r) { return r->head; }

double mt_weight_ring_take_opt_wait(mt_weight_ring *r) {
    double w = r->opt_wait_ms;
    r->opt_wait_ms = 0;
    return w;
}

static void piece_range(const mt_weight_ring *r, int piece, size_t *off, size_t *n) {
    *off = r->pieces[piece];
    *n = r->pieces[piece + 1] - r->pieces[piece];
}

// Issues the next piece of the next use's load (a use that needs no load just advances).
static mt_status issue_piece(mt_weight_ring *r) {
    const mt_weight_use *p = &r->uses[r->issued];
    if (!p->load) {
        r->issued++;
        return MT_OK;
    }
    size_t ws = mt_dtype_size(r->m->wdt), off, n;
    mt_unit *u = mt_model_layer(r->m, p->layer);
    // By part, each piece is a span of its own: the link idles while the next part is updated.
    if (r->by_part) {
        r->opt_wait_ms += mt_opt_worker_wait_part(r->opt, MT_UNIT_OF_LAYER(p->layer), r->issued_piece);
        if (r->issued_piece > 0)
            MT_TRY(mt_traced_copy_begin(r->lk, r->h2d, MT_LANE_H2D, "weights in", p->layer, &r->load_span));
    }
    if (r->issued_piece == 0) {
        if (!r->by_part) r->opt_wait_ms += mt_opt_worker_wait_unit(r->opt, MT_UNIT_OF_LAYER(p->layer));
        MT_TRY(mt_backend_stream_wait(r->be, r->h2d, r->ev_free[p->buf]));
        MT_TRY(mt_traced_copy_begin(r->lk, r->h2d, MT_LANE_H2D, "weights in", p->layer, &r->load_span));
    }
    piece_range(r, r->issued_piece, &off, &n);
    if (r->fetch_ms > 0) r->m->host.spend(&r->m->host, r->fetch_ms); // the peer's hook before this fetch
    // A unit the device updates is copied device to device, after its update on this stream.
    int unit = MT_UNIT_OF_LAYER(p->layer);
    const char *on_dev = r->stage ? (const char *)mt_devopt_master(r->devopt, unit) : mt_devopt_param(r->devopt, unit);
    size_t es = r->stage ? 4 : ws;
    if (on_dev)
        MT_TRY(mt_backend_copy(r->be, (char *)(r->stage ? r->stage[p->buf] : r->buf[p->buf]) + off * es,
                               on_dev + off * es, n * es, MT_COPY_D2D, r->h2d));
    else if (r->stage) // the f32 master crosses; the compute stream casts it at acquire
        MT_TRY(mt_traced_copy_issue(r->lk, (char *)r->stage[p->buf] + off * 4, (char *)u->master + off * 4, n * 4,
                                    MT_COPY_H2D, r->h2d));
    else
        MT_TRY(mt_traced_copy_issue(r->lk, (char *)r->buf[p->buf] + off * ws, (char *)u->param + off * ws, n * ws,
                                    MT_COPY_H2D, r->h2d));
    if (r->by_part && r->issued_piece + 1 < r->n_pieces) MT_TRY(mt_traced_copy_end(r->lk, r->load_span));
    if (++r->issued_piece == r->n_pieces) {
        MT_TRY(mt_traced_copy_end(r->lk, r->load_span));
        MT_TRY(mt_backend_event_record(r->be, r->ev_loaded[p->buf], r->h2d));
        r->issued_piece = 0;
        r->issued++;
    }
    return MT_OK;
}

// Elements already issued for uses after `upto` (the prefetch budget's accounting).
static long long elems_ahead(const mt_weight_ring *r, int upto) {
    long long n = 0;
    for (int i = upto + 1; i <= r->issued && i < r->n_uses; i++) {
        if (!r->uses[i].load) continue;
        int pieces = i < r->issued ? r->n_pieces : r->issued_piece;
        n += (long long)(r->pieces[pieces] - r->pieces[0]);
    }
    return n;
}

// Issues every load the compute of use `upto` needs, then prefetches ahead:
// up to `lookahead` uses (the ring), and within the prefetch budget when there is one.
static mt_status issue_loads(mt_weight_ring *r, int upto) {
    while (r->issued <= upto) MT_TRY(issue_piece(r));
    long long budget = r->prefetch_elems >= 0 ? r->prefetch_elems - elems_ahead(r, upto) : -1;
    while (r->issued < r->n_uses && r->issued <= upto + r->lookahead) {
        if (budget >= 0 && r->uses[r->issued].load) {
            size_t off, n;
            piece_range(r, r->issued_piece, &off, &n);
            if ((long long)n > budget) break;
            budget -= (long long)n;
        }
        MT_TRY(issue_piece(r));
    }
    return MT_OK;
}

mt_status mt_weight_ring_acquire(mt_weight_ring *r, int idx, int layer, mt_layer_ptrs *w) {
    if (idx >= r->n_uses || r->uses[idx].layer != layer)
        return mt_fail(MT_ERR_BACKEND, "internal: weight uses out of step at use %d (layer %d)", idx, layer);
    MT_TRY(issue_loads(r, idx));
    MT_TRY(mt_backend_stream_wait(r->be, MT_STREAM_COMPUTE, r->ev_loaded[r->uses[idx].buf]));
    void *weights = r->buf[r->uses[idx].buf];
    if (r->stage && r->uses[idx].load) // f32 wire: to the weights' dtype on the device, as FSDP2 casts to param_dtype
        MT_TRY(mt_backend_cast(r->be, weights, r->m->wdt, r->stage[r->uses[idx].buf], MT_F32,
                               r->m->lay_layer.numel));
    if (r->template_buf) { // a device-to-device copy into the template, as the official code binds
        size_t bytes = r->m->lay_layer.numel * mt_dtype_size(r->m->wdt);
        MT_TRY(mt_backend_copy(r->be, r->template_buf, weights, bytes, MT_COPY_D2D, MT_STREAM_COMPUTE));
        weights = r->template_buf;
    }
    mt_layer_bind(&r->m->lay_layer, weights, r->m->wdt, w); // pointer arithmetic only
    return MT_OK;
}

mt_status mt_weight_ring_release(mt_weight_ring *r, int idx) {
    return mt_backend_event_record(r->be, r->ev_free[r->uses[idx].buf], MT_STREAM_COMPUTE);
}

mt_status mt_weight_ring_load_resident(mt_weight_ring *r, int unit_index) {
    int head = unit_index != 0;
    mt_unit *u = &r->m->units[unit_index];
    mt_event *ev = head ? r->ev_head_loaded : r->ev_embed_loaded;
    size_t ws = mt_dtype_size(r->m->wdt);
    char *dst = head ? r->head : r->embed;
    int parts = mt_opt_worker_parts(r->opt), span;
    // Part by part where the update is published so: each part crosses once it is updated.
    if (parts == 1) r->opt_wait_ms += mt_opt_worker_wait_unit(r->opt, unit_index);
    for (int p = 0; p < parts; p++) { // a span per part: the link idles while the next part is updated
        size_t lo, hi;
        mt_update_part(u->lay->numel, parts, p, &lo, &hi);
        if (parts > 1) r->opt_wait_ms += mt_opt_worker_wait_part(r->opt, unit_index, p);
        MT_TRY(mt_traced_copy_begin(r->lk, r->h2d, MT_LANE_H2D, head ? "head in" : "embedding in", -1, &span));
        const char *on_dev = mt_devopt_param(r->devopt, unit_index);
        if (on_dev)
            MT_TRY(mt_backend_copy(r->be, dst + lo * ws, on_dev + lo * ws, (hi - lo) * ws, MT_COPY_D2D, r->h2d));
        else
            MT_TRY(mt_traced_copy_issue(r->lk, dst + lo * ws, (char *)u->param + lo * ws, (hi - lo) * ws, MT_COPY_H2D,
                                        r->h2d));
        MT_TRY(mt_traced_copy_end(r->lk, span));
    }
    MT_TRY(mt_backend_event_record(r->be, ev, r->h2d));
    return mt_backend_stream_wait(r->be, MT_STREAM_COMPUTE, ev);
}

mt_status mt_weight_ring_load_first_if_kept(mt_weight_ring *r) {
    if (r->issued > 0 || !r->n_uses || !r->uses[0].load) return MT_OK;
    if (!mt_opt_worker_published(r->opt, MT_UNIT_OF_LAYER(r->uses[0].layer))) return MT_OK;
    while (r->issued == 0) MT_TRY(issue_piece(r)); // the first use only: no lookahead that would wait
    return MT_OK;
}

mt_status mt_weight_ring_load_embedding(mt_weight_ring *r, const int32_t *ids, size_t n, int32_t *compact, int *used) {
    *used = 0;
    if (r->rows) {
        double waited;
        MT_TRY(mt_embed_rows_load(r->rows, ids, n, compact, used, &waited));
        r->opt_wait_ms += waited;
        if (*used) return MT_OK;
    }
    return mt_weight_ring_load_resident(r, 0);
}

void mt_weight_ring_announce(mt_weight_ring *r, const int32_t *const *spans, int n_spans, size_t span_len) {
    if (r->rows) mt_embed_rows_announce(r->rows, spans, n_spans, span_len);
}

void mt_weight_ring_hand_over_rows(mt_weight_ring *r) {
    if (r->rows) mt_embed_rows_hand_over(r->rows);
}

double mt_weight_ring_wait_update(mt_weight_ring *r, int unit) {
    double ms = mt_opt_worker_wait_unit(r->opt, unit);
    r->opt_wait_ms += ms;
    return ms;
}
