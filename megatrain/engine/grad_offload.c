// grad_offload.c: the device gradient buffers, the wire staging and the drain.
#include "engine/grad_offload.h"

#include <stdlib.h>

#include "engine/device_optimizer.h"

struct mt_grad_offload {
    mt_backend *be;
    mt_model *m;
    int G, n_units;
    mt_dtype wire;
    mt_stream_id d2h;
    void *layer_buf[2];
    mt_event *ev_layer_free[2];
    int next;
    void *embed, *head;
    mt_event *ev_embed_free, *ev_head_free, *ev_ready;
    void *stage[2];          // f32 wire: a unit's gradients cast before they leave (double-buffered)
    mt_event *ev_stage_free[2];
    int stage_next;
    float *grad_sum;         // f32 sum of a chunked weight gradient (the head's, then each layer's MLP), or NULL
    mt_drain *drain;
    double *sumsq;           // per unit, set by the drain on the last micro-batch
    mt_drain_final_fn then;  // told next (the speculative step's optimizer), or NULL
    void *then_ctx;
    mt_collective *coll;     // --gpus N: reduces and lands the gradients with the other ranks' (NULL: one rank)
    int rank;
    struct mt_devopt *devopt; // units whose gradients stay on the device (device_optimizer.h), or NULL
};

static size_t stage_elems(const mt_engine_shape *sh) { return sh->wire != sh->wdt ? sh->slab_elems : 0; }

mt_part_bytes mt_grad_offload_bytes(const mt_engine_shape *sh) {
    size_t layer = mt_dev_round(sh->lay_layer.numel * sh->wdt_elem_bytes),
           slabs = (size_t)sh->grad_slabs * sh->slab_elems * mt_dtype_size(sh->wire);
    size_t stage = stage_elems(sh) ? 2 * mt_dev_round(stage_elems(sh) * mt_dtype_size(sh->wire)) : 0;
    size_t sum = sh->grad_sum_elems ? mt_dev_round(sh->grad_sum_elems * 4) : 0;
    return (mt_part_bytes){.device = 2 * layer + mt_dev_round(sh->lay_embed.numel * sh->wdt_elem_bytes) +
                                     mt_dev_round(sh->lay_head.numel * sh->wdt_elem_bytes) + stage + sum,
                           .host = slabs,
                           .pinned = slabs};
}

// The drain's per-unit hook: the unit's gradients are final in host memory.
static void on_final(void *ctx, int unit, double sumsq) {
    mt_grad_offload *g = ctx;
    g->sumsq[unit] = sumsq;
    if (g->then) g->then(g->then_ctx, unit, sumsq);
}

void mt_grad_offload_on_final(mt_grad_offload *g, mt_drain_final_fn fn, void *ctx) {
    g->then = fn;
    g->then_ctx = ctx;
}

mt_status mt_grad_offload_create(const mt_engine_shape *sh, mt_model *m, mt_traced_copy *lk, mt_devmem *dm,
                                 mt_grad_offload **out) {
    mt_grad_offload *g = calloc(1, sizeof *g);
    if (!g) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the gradient offload");
    *out = g;
    g->be = lk->be; // this rank's backend (the model's blocks may be another's)
    g->m = m;
    g->G = sh->G;
    g->n_units = m->n_units;
    g->wire = sh->wire;
    g->d2h = mt_schedule_d2h_stream(&sh->s);
    g->sumsq = calloc((size_t)m->n_units, sizeof *g->sumsq);
    if (!g->sumsq) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the gradient offload");
    size_t before = dm->bytes, ws = sh->wdt_elem_bytes;
    for (int i = 0; i < 2; i++) {
        MT_TRY(mt_devmem_alloc(dm, sh->lay_layer.numel * ws, &g->layer_buf[i]));
        MT_TRY(mt_backend_event_create(g->be, &g->ev_layer_free[i]));
    }
    if (stage_elems(sh))
        for (int i = 0; i < 2; i++) {
            MT_TRY(mt_devmem_alloc(dm, stage_elems(sh) * mt_dtype_size(sh->wire), &g->stage[i]));
            MT_TRY(mt_backend_event_create(g->be, &g->ev_stage_free[i]));
        }
    MT_TRY(mt_devmem_alloc(dm, sh->lay_embed.numel * ws, &g->embed));
    MT_TRY(mt_devmem_alloc(dm, sh->lay_head.numel * ws, &g->head));
    if (sh->grad_sum_elems) MT_TRY(mt_devmem_alloc(dm, sh->grad_sum_elems * 4, (void **)&g->grad_sum));
    MT_TRY(mt_part_check("gradient offload", mt_grad_offload_bytes(sh).device, dm->bytes - before));
    // Backward never writes the padding between tensor groups; zero it once so
    // offloaded gradients (and their norm) see zeros there.
    void *gz[] = {g->layer_buf[0], g->layer_buf[1], g->embed, g->head};
    size_t gzb[] = {sh->lay_layer.numel * ws, sh->lay_layer.numel * ws, sh->lay_embed.numel * ws,
                    sh->lay_head.numel * ws};
    for (int i = 0; i < 4; i++) MT_TRY(mt_backend_memset_zero(g->be, gz[i], gzb[i], MT_STREAM_COMPUTE));
    mt_event **evs[] = {&g->ev_embed_free, &g->ev_head_free, &g->ev_ready};
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++) MT_TRY(mt_backend_event_create(g->be, evs[i]));
    MT_TRY(mt_drain_create(g->be, lk, &m->host, sh->grad_slabs, sh->slab_elems * mt_dtype_size(sh->wire), &g->drain));
    mt_drain_on_final(g->drain, on_final, g);
    return MT_OK;
}

float *mt_grad_offload_sum(const mt_grad_offload *g) { return g->grad_sum; }

void mt_grad_offload_join(mt_grad_offload *g, mt_collective *c, int rank, mt_grad_offload *leader) {
    g->coll = c;
    g->rank = rank;
    mt_drain_set_collective(g->drain, c, rank);
    mt_drain_on_final(g->drain, on_final, leader); // a unit is final once, for all ranks: in the leader's norm
}

void mt_grad_offload_set_devopt(mt_grad_offload *g, struct mt_devopt *d) { g->devopt = d; }

void mt_grad_offload_destroy(mt_grad_offload *g) {
    if (!g) return;
    if (g->drain) mt_drain_destroy(g->drain);
    mt_event *evs[] = {g->ev_layer_free[0], g->ev_layer_free[1], g->ev_stage_free[0], g->ev_stage_free[1],
                       g->ev_embed_free, g->ev_head_free, g->ev_ready};
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
        if (evs[i]) mt_backend_event_destroy(g->be, evs[i]);
    free(g->sumsq);
    free(g);
}

void *mt_grad_offload_embed(const mt_grad_offload *g) { return g->embed; }
void *mt_grad_offload_head(const mt_grad_offload *g) { return g->head; }

mt_status mt_grad_offload_layer_buffer(mt_grad_offload *g, void **buf, int *slot) {
    int k = g->next;
    g->next ^= 1;
    MT_TRY(mt_backend_stream_wait(g->be, MT_STREAM_COMPUTE, g->ev_layer_free[k]));
    *buf = g->layer_buf[k];
    *slot = k;
    return MT_OK;
}

mt_status mt_grad_offload_resident_free(mt_grad_offload *g) {
    MT_TRY(mt_backend_stream_wait(g->be, MT_STREAM_COMPUTE, g->ev_head_free));
    return mt_backend_stream_wait(g->be, MT_STREAM_COMPUTE, g->ev_embed_free);
}

// Sends a unit's device gradients to the drain. An f32 wire casts them first
// (DeepSpeed offloads fp32 gradients: twice the bytes, the same values).
static mt_status send(mt_grad_offload *g, int unit_index, const void *dev_grad, mt_event *dev_free, int mb) {
    if (mt_devopt_on_device(g->devopt, unit_index)) { // summed where the device updates it: nothing crosses
        MT_TRY(mt_devopt_grad_in(g->devopt, unit_index, dev_grad, mb, g->G));
        return dev_free ? mt_backend_event_record(g->be, dev_free, MT_STREAM_COMPUTE) : MT_OK;
    }
    mt_unit *u = &g->m->units[unit_index];
    const void *src = dev_grad;
    size_t off = 0, count = u->lay->numel;
    if (g->wire != g->m->wdt) {
        int k = g->stage_next;
        g->stage_next ^= 1;
        MT_TRY(mt_backend_stream_wait(g->be, MT_STREAM_COMPUTE, g->ev_stage_free[k]));
        MT_TRY(mt_backend_cast(g->be, g->stage[k], g->wire, dev_grad, g->m->wdt, u->lay->numel));
        if (dev_free) MT_TRY(mt_backend_event_record(g->be, dev_free, MT_STREAM_COMPUTE));
        src = g->stage[k];
        dev_free = g->ev_stage_free[k];
    }
    // --gpus N: reduced with the other ranks' (on the devices, or later on the host); this rank sends its part.
    // A device collective reduces on its own stream: the next layer's backward runs on meanwhile.
    if (g->coll)
        MT_TRY(g->coll->reduce(g->coll, g->rank, g->be, (void *)src, g->wire, count, MT_STREAM_COMPUTE, g->ev_ready,
                               &off, &count));
    else
        MT_TRY(mt_backend_event_record(g->be, g->ev_ready, MT_STREAM_COMPUTE));
    mt_offload of = {.u = u, .unit = unit_index, .wdt = g->m->wdt,
                     .dev_grad = (const char *)src + off * mt_dtype_size(g->wire), .wire = g->wire,
                     .ready = g->ev_ready, .dev_free = dev_free, .stream = g->d2h, .first = mb == 0,
                     .last = mb == g->G - 1, .mb = mb, .G = g->G, .off = off, .count = count,
                     // The first micro-batch lands in the pinned host gradients themselves (one rank only:
                     // with several, the collective orders what lands there).
                     .direct = !g->coll && mb == 0 && g->wire == g->m->wdt && g->m->pinned};
    return mt_drain_offload(g->drain, &of);
}

mt_status mt_grad_offload_send_layer(mt_grad_offload *g, int layer, int slot, int mb) {
    return send(g, MT_UNIT_OF_LAYER(layer), g->layer_buf[slot], g->ev_layer_free[slot], mb);
}

mt_status mt_grad_offload_send_resident(mt_grad_offload *g, int unit_index, int mb) {
    int head = unit_index != 0;
    return send(g, unit_index, head ? g->head : g->embed, head ? g->ev_head_free : g->ev_embed_free, mb);
}

mt_status mt_grad_offload_drained(mt_grad_offload *g, double *wait_ms) {
    MT_TRY(mt_drain_wait_all(g->drain));
    *wait_ms = mt_drain_take_wait_ms(g->drain);
    return MT_OK;
}

double mt_grad_offload_unit_sumsq(const mt_grad_offload *g, int unit) { return g->sumsq[unit]; }

mt_status mt_grad_offload_finish(mt_grad_offload *g, double *wait_ms, double *sumsq) {
    MT_TRY(mt_grad_offload_drained(g, wait_ms));
    MT_TRY(mt_devopt_sumsq(g->devopt, g->sumsq)); // the device's units, in their places of the fixed order
    double sq = 0;
    for (int u = 0; u < g->n_units; u++) sq += g->sumsq[u];
    *sumsq = sq;
    return MT_OK;
}
