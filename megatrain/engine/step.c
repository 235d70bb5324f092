// step.c: the schedule. The host thread walks the step's weight plan,
// enqueueing weight loads (H2D stream) a few uses ahead of the compute that
// needs them, the layer kernels (compute stream), and gradient offloads (D2H
// stream -> pinned slabs -> drain thread). Events order the streams; the host
// only blocks where the data truly is not ready (an optimizer update still
// running for a unit, a full slab pool).
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/vclock.h"
#include "engine/engine_internal.h"

// Input / output buffers of layer i in the forward pass.
static void *layer_input(mt_engine *e, int i) {
    if (e->s.keep_activations) return e->ckpt[i];
    return i % e->K == 0 ? mt_ckpt_dev(e, i / e->K) : e->x_tmp[i & 1];
}
// The checkpoint index layer i's output becomes, or -1.
static int output_ckpt(const mt_engine *e, int i) {
    int K = e->K;
    return !e->s.keep_activations && i + 1 < e->L && (i + 1) % K == 0 ? (i + 1) / K : -1;
}
static void *layer_output(mt_engine *e, int i) { return i + 1 == e->L ? e->x_final : layer_input(e, i + 1); }

static mt_layer_acts *acts_for(mt_engine *e, int i) { return &e->acts[e->n_acts == 1 ? 0 : i]; }

static mt_status forward(mt_engine *e, int mb, int *cursor, mt_step_stats *st) {
    const mt_backend_ops *o = e->be->ops;
    mt_backend *be = e->be;
    MT_TRY(o->copy(be, e->d_ids, e->h_ids + (size_t)mb * e->d.N, (size_t)e->d.N * 4, MT_COPY_H2D, MT_STREAM_COMPUTE));
    MT_TRY(o->copy(be, e->d_tgt, e->h_tgt + (size_t)mb * e->d.N, (size_t)e->d.N * 4, MT_COPY_H2D, MT_STREAM_COMPUTE));
    if (mb == 0) MT_TRY(mt_weights_load_resident(e, mt_model_embed(e->m), e->embed_w, e->ev_embed_loaded, 0, st));
    const mt_view *ve = &e->m->lay_embed.t[MT_T_EMBED];
    int span;
    MT_TRY(mt_ckpt_before_write(e, 0));
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "embedding", -1, &span));
    MT_TRY(o->embedding_fwd(be, layer_input(e, 0), e->d_ids,
                            (char *)e->embed_w + ve->offset * mt_dtype_size(e->m->wdt), e->m->wdt, e->d.N, e->d.C));
    MT_TRY(mt_trace_end(e->trace, span));
    if (!e->s.keep_activations) MT_TRY(mt_ckpt_after_write(e, 0));
    for (int i = 0; i < e->L; i++) {
        mt_layer_view w;
        int j = output_ckpt(e, i);
        MT_TRY(mt_weights_acquire(e, *cursor, i, &w, st));
        if (j >= 0) MT_TRY(mt_ckpt_before_write(e, j));
        MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "forward", i, &span));
        MT_TRY(mt_layer_forward(be, &e->d, &w, acts_for(e, i), &e->scratch, layer_input(e, i), layer_output(e, i)));
        MT_TRY(mt_trace_end(e->trace, span));
        if (j >= 0) MT_TRY(mt_ckpt_after_write(e, j));
        e->acts_layer = i;
        MT_TRY(mt_weights_release(e, (*cursor)++));
    }
    if (mb == 0) MT_TRY(mt_weights_load_resident(e, mt_model_head(e->m), e->head_w, e->ev_head_loaded, e->m->n_units - 1, st));
    return MT_OK;
}

// Sends a unit's device gradients to the host drain. zero3 first casts them to
// f32 (DeepSpeed offloads fp32 gradients: twice the bytes, same values).
static mt_status offload(mt_engine *e, int unit_index, const void *dev_grad, mt_event *dev_free, int mb) {
    const mt_backend_ops *o = e->be->ops;
    mt_unit *u = &e->m->units[unit_index];
    const void *src = dev_grad;
    if (e->link_dtype != e->m->wdt) {
        int k = e->link_next;
        e->link_next ^= 1;
        MT_TRY(o->stream_wait(e->be, MT_STREAM_COMPUTE, e->ev_link_free[k]));
        MT_TRY(o->cast(e->be, e->link_buf[k], e->link_dtype, dev_grad, e->m->wdt, u->lay->numel));
        if (dev_free) MT_TRY(o->event_record(e->be, dev_free, MT_STREAM_COMPUTE));
        src = e->link_buf[k];
        dev_free = e->ev_link_free[k];
    }
    MT_TRY(o->event_record(e->be, e->ev_ready, MT_STREAM_COMPUTE));
    mt_offload of = {.u = u, .wdt = e->m->wdt, .dev_grad = src, .link_dtype = e->link_dtype, .ready = e->ev_ready,
                     .dev_free = dev_free, .stream = e->d2h, .first = mb == 0, .last = mb == e->o.grad_accum - 1,
                     .sumsq = &e->sumsq[unit_index]};
    return mt_drain_offload(e->drain, &of);
}

// Backward of layer i from its saved input; dx holds dL/d(output of i).
static mt_status layer_backward(mt_engine *e, int i, void *x_in, int mb, int *cursor, mt_step_stats *st) {
    mt_backend *be = e->be;
    mt_layer_view w, g;
    MT_TRY(mt_weights_acquire(e, *cursor, i, &w, st));
    mt_layer_acts *a = acts_for(e, i);
    int span;
    if (e->n_acts == 1 && e->acts_layer != i) {
        MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "recompute", i, &span));
        MT_TRY(mt_layer_forward(be, &e->d, &w, a, &e->scratch, x_in, NULL)); // recompute the internals
        MT_TRY(mt_trace_end(e->trace, span));
        e->acts_layer = i;
    }
    int k = e->gnext;
    e->gnext ^= 1;
    MT_TRY(be->ops->stream_wait(be, MT_STREAM_COMPUTE, e->ev_gfree[k]));
    mt_layer_bind(&e->m->lay_layer, e->gbuf[k], e->m->wdt, &g);
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "backward", i, &span));
    MT_TRY(mt_layer_backward(be, &e->d, &w, &g, a, &e->scratch, x_in, e->dx));
    MT_TRY(mt_trace_end(e->trace, span));
    MT_TRY(mt_weights_release(e, (*cursor)++));
    return offload(e, MT_UNIT_OF_LAYER(i), e->gbuf[k], e->ev_gfree[k], mb);
}

static mt_status backward(mt_engine *e, int mb, int *cursor, mt_step_stats *st) {
    mt_backend *be = e->be;
    const mt_backend_ops *o = be->ops;
    const mt_model *m = e->m;
    int tied = m->cfg.tie_word_embeddings;
    float dscale = 1.0f / ((float)e->d.N * (float)e->o.grad_accum);

    // Head: its grads (and the tied embedding's) must have left the device buffers.
    MT_TRY(o->stream_wait(be, MT_STREAM_COMPUTE, e->ev_head_gfree));
    MT_TRY(o->stream_wait(be, MT_STREAM_COMPUTE, e->ev_embed_gfree));
    int span;
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "loss head", -1, &span));
    MT_TRY(mt_head_forward_backward(e, mb, 1, dscale));
    MT_TRY(mt_trace_end(e->trace, span));
    MT_TRY(o->copy(be, e->h_losses + (size_t)mb * e->d.N, e->losses, (size_t)e->d.N * 4, MT_COPY_D2H,
                   MT_STREAM_COMPUTE));
    MT_TRY(offload(e, m->n_units - 1, e->head_g, e->ev_head_gfree, mb));

    const int K = e->K;
    if (e->s.keep_activations) {
        for (int i = e->L - 1; i >= 0; i--) MT_TRY(layer_backward(e, i, e->ckpt[i], mb, cursor, st));
    } else {
        for (int s = (e->L - 1) / K * K; s >= 0; s -= K) {
            int end = s + K < e->L ? s + K : e->L, j = s / K;
            MT_TRY(mt_ckpt_prefetch(e, j - 1)); // the next block's input streams in while this one computes
            MT_TRY(mt_ckpt_acquire(e, j));
            e->blk_in[0] = mt_ckpt_dev(e, j);
            for (int i = s; i < end - 1; i++) { // rebuild the inputs of the block's layers
                mt_layer_view w;
                MT_TRY(mt_weights_acquire(e, *cursor, i, &w, st));
                MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "recompute", i, &span));
                MT_TRY(mt_layer_forward(be, &e->d, &w, &e->acts[0], &e->scratch, e->blk_in[i - s], e->blk_in[i - s + 1]));
                MT_TRY(mt_trace_end(e->trace, span));
                e->acts_layer = i;
                MT_TRY(mt_weights_release(e, (*cursor)++));
            }
            for (int i = end - 1; i >= s; i--) MT_TRY(layer_backward(e, i, e->blk_in[i - s], mb, cursor, st));
            MT_TRY(mt_ckpt_release(e, j));
        }
    }

    // Embedding: scatter-add dx into the embedding gradient (after the tied head's part).
    const mt_view *ve = &m->lay_embed.t[MT_T_EMBED];
    size_t ws = mt_dtype_size(m->wdt);
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "embedding backward", -1, &span));
    if (!tied) MT_TRY(o->memset_zero(be, e->embed_g, m->lay_embed.numel * ws, MT_STREAM_COMPUTE));
    MT_TRY(o->embedding_bwd(be, (char *)e->embed_g + ve->offset * ws, m->wdt, e->d_ids, e->dx, e->d.N, e->d.C));
    MT_TRY(mt_trace_end(e->trace, span));
    return offload(e, 0, e->embed_g, e->ev_embed_gfree, mb);
}

mt_status mt_engine_step(mt_engine *e, const int32_t *inputs, const int32_t *targets, const mt_optim_hparams *hp,
                         float lr, int step, mt_step_stats *st) {
    memset(st, 0, sizeof *st);
    const int G = e->o.grad_accum, N = e->d.N;
    memcpy(e->h_ids, inputs, (size_t)G * N * 4);
    memcpy(e->h_tgt, targets, (size_t)G * N * 4);
    e->issued = e->issued_piece = 0;
    e->h2d_bytes = e->d2h_bytes = 0;
    MT_TRY(mt_trace_step_begin(e->trace, step));
    int cursor = 0;
    for (int mb = 0; mb < G; mb++) {
        MT_TRY(forward(e, mb, &cursor, st));
        MT_TRY(backward(e, mb, &cursor, st));
    }
    if (cursor != e->n_plan) return mt_fail(MT_ERR_BACKEND, "internal: weight plan has %d entries, used %d", e->n_plan, cursor);
    MT_TRY(mt_drain_wait_all(e->drain));
    // Every stream, not just compute: the trace reads all the step's events, and a
    // checkpoint's copy-out on the D2H stream has no later reader to wait for it.
    for (int s = 0; s < MT_NUM_STREAMS; s++) MT_TRY(e->be->ops->stream_sync(e->be, (mt_stream_id)s));
    st->drain_wait_ms = mt_drain_take_wait_ms(e->drain);
    mt_phase_times ph;
    MT_TRY(mt_trace_step_end(e->trace, &ph));
    st->compute_ms = ph.busy_ms[MT_LANE_COMPUTE];
    st->h2d_ms = ph.busy_ms[MT_LANE_H2D];
    st->d2h_ms = ph.busy_ms[MT_LANE_D2H];
    st->drain_ms = ph.busy_ms[MT_LANE_DRAIN];
    st->optimizer_ms = ph.busy_ms[MT_LANE_OPTIMIZER];
    st->span_ms = ph.step_ms;
    st->h2d_bytes = e->h2d_bytes;
    st->d2h_bytes = e->d2h_bytes;

    double loss = 0, sq = 0;
    for (size_t i = 0; i < (size_t)G * N; i++) loss += e->h_losses[i];
    for (int u = 0; u < e->m->n_units; u++) sq += e->sumsq[u];
    st->loss = mt_backend_is_virtual(e->be) ? NAN : loss / ((double)G * N); // sim: no data, no loss
    st->grad_norm = sqrt(sq);
    st->tokens = (long long)G * N;
    // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1.
    st->clip_factor = 1.0;
    if (hp->grad_clip > 0) {
        float coef = (float)(hp->grad_clip / ((float)st->grad_norm + 1e-6));
        st->clip_factor = coef < 1.0f ? coef : 1.0f;
    }
    mt_adamw_hparams h = {.lr = lr, .beta1 = hp->beta1, .beta2 = hp->beta2, .eps = hp->eps,
                          .grad_scale = (float)st->clip_factor, .step = step};
    mt_opt_worker_start(e->opt, &h, hp->weight_decay);
    if (!e->s.optimizer_overlapped) st->opt_wait_ms += mt_opt_worker_wait_all(e->opt);
    e->step_done++;
    return MT_OK;
}

double mt_engine_now_ms(const mt_engine *e) { return mt_trace_host_now(e->trace); }

mt_status mt_engine_write_trace(mt_engine *e, const char *path) { return mt_trace_write(e->trace, path); }

mt_status mt_engine_finish(mt_engine *e) {
    mt_opt_worker_wait_all(e->opt);
    return MT_OK;
}

mt_status mt_engine_eval(mt_engine *e, const int32_t *inputs, const int32_t *targets, double *loss_sum) {
    mt_step_stats st;
    memset(&st, 0, sizeof st);
    const int N = e->d.N;
    memcpy(e->h_ids, inputs, (size_t)N * 4);
    memcpy(e->h_tgt, targets, (size_t)N * 4);
    e->issued = e->issued_piece = 0;
    MT_TRY(mt_trace_step_begin(e->trace, 0)); // also recycles the trace's events, eval after eval
    int cursor = 0;
    MT_TRY(forward(e, 0, &cursor, &st));
    MT_TRY(mt_head_forward_backward(e, 0, 0, 1.0f));
    MT_TRY(e->be->ops->copy(e->be, e->h_losses, e->losses, (size_t)N * 4, MT_COPY_D2H, MT_STREAM_COMPUTE));
    for (int s = 0; s < MT_NUM_STREAMS; s++) MT_TRY(e->be->ops->stream_sync(e->be, (mt_stream_id)s));
    mt_phase_times ph;
    MT_TRY(mt_trace_step_end(e->trace, &ph));
    double s = 0;
    for (int i = 0; i < N; i++) s += e->h_losses[i];
    *loss_sum = s;
    return MT_OK;
}
