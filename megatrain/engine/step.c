// step.c: the schedule walk. The host thread walks the step's weight uses,
// enqueueing weight loads (H2D stream) a few uses ahead of the compute that
// needs them, the layer kernels (compute stream), and gradient offloads (D2H
// stream -> pinned slabs -> drain thread). Events order the streams; the host
// only blocks where the data truly is not ready (an optimizer update still
// running for a unit, a full slab pool). What differs between schedules is
// the descriptor the parts were made from, never a branch on its name.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/host_shard.h"
#include "optim/grad_ops.h"

// Input / output buffers of layer i in the forward pass: with activations kept
// every input is a checkpoint; else every K-th, the others ping-pong.
static void *layer_input(mt_engine *e, int i) {
    int K = e->sched->ckpt_interval;
    if (e->sched->keep_activations) return mt_ckpt_dev(e->ckpts, i);
    return i % K == 0 ? mt_ckpt_dev(e->ckpts, i / K) : e->acts->x_tmp[i & 1];
}
// The checkpoint index layer i's output becomes, or -1.
static int output_ckpt(const mt_engine *e, int i) {
    int K = e->sched->ckpt_interval;
    return !e->sched->keep_activations && i + 1 < e->sh.L && (i + 1) % K == 0 ? (i + 1) / K : -1;
}
static void *layer_output(mt_engine *e, int i) { return i + 1 == e->sh.L ? e->acts->x_final : layer_input(e, i + 1); }

static mt_layer_acts *acts_for(mt_engine *e, int i) { return &e->acts->acts[e->acts->n_acts == 1 ? 0 : i]; }

// A layer's forward in a trace span on the compute stream (x_out NULL: internals only).
static mt_status layer_forward(mt_engine *e, const char *what, int i, const mt_layer_ptrs *w, mt_layer_acts *a,
                               const void *x_in, void *x_out) {
    int span;
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, what, i, &span));
    MT_TRY(mt_layer_forward(e->be, &e->dims, w, a, &e->acts->scratch, x_in, x_out));
    MT_TRY(mt_trace_end(e->trace, span));
    if (a == &e->acts->acts[0]) e->acts->acts_layer = i;
    return MT_OK;
}

// n_mb: the micro-batches this pass reads (G in a step, 1 in an eval): the embedding
// loads once, for all of their ids.
static mt_status forward(mt_engine *e, int mb, int n_mb, int *cursor) {
    mt_backend *be = e->be;
    mt_activations *a = e->acts;
    const int N = e->dims.N;
    MT_TRY(mt_backend_copy(be, a->d_ids, a->h_ids + (size_t)mb * N, (size_t)N * 4, MT_COPY_H2D, MT_STREAM_COMPUTE));
    MT_TRY(mt_backend_copy(be, a->d_tgt, a->h_tgt + (size_t)mb * N, (size_t)N * 4, MT_COPY_H2D, MT_STREAM_COMPUTE));
    if (mb == 0 && e->sh.rows_cap) MT_TRY(mt_weight_ring_load_first_if_kept(e->ring));
    if (mb == 0) MT_TRY(mt_weight_ring_load_embedding(e->ring, a->h_ids, (size_t)n_mb * N, a->h_rows, &a->rows_used));
    if (a->rows_used) // the lookup reads the compact table the rows were copied into
        MT_TRY(
            mt_backend_copy(be, a->d_rows, a->h_rows + (size_t)mb * N, (size_t)N * 4, MT_COPY_H2D, MT_STREAM_COMPUTE));
    const mt_tensor_slot *ve = &e->model->lay_embed.t[MT_T_EMBED];
    int span;
    MT_TRY(mt_ckpt_before_write(e->ckpts, 0));
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "embedding", -1, &span));
    MT_TRY(mt_backend_embedding_fwd(be, layer_input(e, 0), a->rows_used ? a->d_rows : a->d_ids,
                                    (char *)mt_weight_ring_embed(e->ring) + ve->offset * mt_dtype_size(e->model->wdt),
                                    e->model->wdt, N, e->dims.C));
    MT_TRY(mt_trace_end(e->trace, span));
    if (!e->sched->keep_activations) MT_TRY(mt_ckpt_after_write(e->ckpts, 0));
    for (int i = 0; i < e->sh.L; i++) {
        mt_layer_ptrs w;
        int j = output_ckpt(e, i);
        MT_TRY(mt_weight_ring_acquire(e->ring, *cursor, i, &w));
        if (j >= 0) MT_TRY(mt_ckpt_before_write(e->ckpts, j));
        MT_TRY(layer_forward(e, "forward", i, &w, acts_for(e, i), layer_input(e, i), layer_output(e, i)));
        if (j >= 0) MT_TRY(mt_ckpt_after_write(e->ckpts, j));
        MT_TRY(mt_weight_ring_release(e->ring, (*cursor)++));
    }
    if (mb == 0) MT_TRY(mt_weight_ring_load_resident(e->ring, e->model->n_units - 1));
    return MT_OK;
}

// Backward of layer i from its saved input; dx holds dL/d(output of i).
static mt_status layer_backward(mt_engine *e, int i, void *x_in, int mb, int *cursor) {
    mt_layer_ptrs w, g;
    MT_TRY(mt_weight_ring_acquire(e->ring, *cursor, i, &w));
    mt_layer_acts *a = acts_for(e, i);
    // Recompute the internals; three weight passes re-run the forward in every backward (the official code).
    if (e->acts->n_acts == 1 && (e->acts->acts_layer != i || e->sched->weight_passes == 3))
        MT_TRY(layer_forward(e, "recompute", i, &w, a, x_in, NULL));
    void *gbuf;
    int slot, span;
    MT_TRY(mt_grad_offload_layer_buffer(e->grads, &gbuf, &slot));
    mt_layer_bind(&e->model->lay_layer, gbuf, e->model->wdt, &g);
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "backward", i, &span));
    MT_TRY(mt_layer_backward(e->be, &e->dims, &w, &g, a, &e->acts->scratch, x_in, e->acts->dx));
    MT_TRY(mt_trace_end(e->trace, span));
    MT_TRY(mt_weight_ring_release(e->ring, (*cursor)++));
    return mt_grad_offload_send_layer(e->grads, i, slot, mb);
}

static mt_status backward(mt_engine *e, int mb, int *cursor) {
    mt_backend *be = e->be;
    const mt_model *m = e->model;
    mt_activations *a = e->acts;
    const int L = e->sh.L, K = e->sched->ckpt_interval, N = e->dims.N;
    // The mean over the step's tokens: --gpus N has G x N micro-batches of N tokens (one rank's count, as
    // one rank running them all in turn computes it).
    float dscale = 1.0f / ((float)N * (float)(e->sh.G * e->n_slices));

    // Head: its grads (and the tied embedding's) must have left the device buffers.
    MT_TRY(mt_grad_offload_resident_free(e->grads));
    int span;
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "loss head", -1, &span));
    MT_TRY(mt_head_forward_backward(e, mb, 1, dscale));
    MT_TRY(mt_trace_end(e->trace, span));
    MT_TRY(mt_backend_copy(be, a->h_losses + (size_t)mb * N, a->losses, (size_t)N * 4, MT_COPY_D2H, MT_STREAM_COMPUTE));
    MT_TRY(mt_grad_offload_send_resident(e->grads, m->n_units - 1, mb));

    if (e->sched->keep_activations) {
        for (int i = L - 1; i >= 0; i--) MT_TRY(layer_backward(e, i, mt_ckpt_dev(e->ckpts, i), mb, cursor));
    } else {
        for (int s = (L - 1) / K * K; s >= 0; s -= K) {
            int end = s + K < L ? s + K : L, j = s / K;
            MT_TRY(mt_ckpt_prefetch(e->ckpts, j - 1)); // the next block's input streams in while this one computes
            MT_TRY(mt_ckpt_acquire(e->ckpts, j));
            a->blk_in[0] = mt_ckpt_dev(e->ckpts, j);
            // Rebuild the inputs of the block's layers; three weight passes run its last layer too (output unused).
            int tail = e->sched->weight_passes == 3;
            for (int i = s; i < end - 1 + tail; i++) {
                mt_layer_ptrs w;
                MT_TRY(mt_weight_ring_acquire(e->ring, *cursor, i, &w));
                MT_TRY(layer_forward(e, "recompute", i, &w, &a->acts[0], a->blk_in[i - s],
                                     i < end - 1 ? a->blk_in[i - s + 1] : NULL));
                MT_TRY(mt_weight_ring_release(e->ring, (*cursor)++));
            }
            for (int i = end - 1; i >= s; i--) MT_TRY(layer_backward(e, i, a->blk_in[i - s], mb, cursor));
            MT_TRY(mt_ckpt_release(e->ckpts, j));
        }
    }

    // Embedding: scatter-add dx into the embedding gradient (after the tied head's part).
    const mt_tensor_slot *ve = &m->lay_embed.t[MT_T_EMBED];
    size_t ws = mt_dtype_size(m->wdt);
    void *embed_g = mt_grad_offload_embed(e->grads);
    MT_TRY(mt_trace_begin(e->trace, MT_STREAM_COMPUTE, "embedding backward", -1, &span));
    if (!m->cfg.tie_word_embeddings)
        MT_TRY(mt_backend_memset_zero(be, embed_g, m->lay_embed.numel * ws, MT_STREAM_COMPUTE));
    MT_TRY(mt_backend_embedding_bwd(be, (char *)embed_g + ve->offset * ws, m->wdt, a->d_ids, a->dx, N, e->dims.C));
    MT_TRY(mt_trace_end(e->trace, span));
    // Rows first: the last update's other rows may still be running, and read the gradient
    // this one lands on (the first micro-batch's lands in place).
    if (mb == 0 && e->sh.rows_cap) mt_weight_ring_wait_update(e->ring, 0);
    return mt_grad_offload_send_resident(e->grads, 0, mb);
}

// One rank's part of a step, begun: its rows of each micro-batch in, the ring and link rewound,
// the step's timeline opened. inputs: the step's G global micro-batches (the rank takes its slice).
static mt_status rank_begin(mt_engine *e, const int32_t *inputs, const int32_t *targets, int step) {
    const int G = e->sh.G, N = e->dims.N, S = e->n_slices;
    mt_activations *a = e->acts;
    // Micro-batch g of the step holds S slices of N tokens; this rank's is `slice`.
    for (int g = 0; g < G; g++) {
        size_t from = ((size_t)g * S + e->slice) * N;
        memcpy(a->h_ids + (size_t)g * N, inputs + from, (size_t)N * 4);
        memcpy(a->h_tgt + (size_t)g * N, targets + from, (size_t)N * 4);
    }
    mt_weight_ring_rewind(e->ring);
    mt_weight_ring_take_opt_wait(e->ring); // waits outside a step (an eval) are not this step's
    mt_traced_copy_rewind(&e->link);
    return mt_trace_step_begin(e->trace, step);
}

// ... and walked: forward and backward over the G micro-batches.
static mt_status rank_walk(mt_engine *e) {
    const int G = e->sh.G;
    int cursor = 0;
    for (int mb = 0; mb < G; mb++) {
        MT_TRY(forward(e, mb, G, &cursor));
        MT_TRY(backward(e, mb, &cursor));
    }
    int n_uses = mt_weight_ring_n_uses(e->ring);
    if (cursor != n_uses)
        return mt_fail(MT_ERR_BACKEND, "internal: the step has %d weight uses, walked %d", n_uses, cursor);
    return MT_OK;
}

// Every stream, not just compute: the trace reads all the step's events, and a
// checkpoint's copy-out on the D2H stream has no later reader to wait for it.
static mt_status sync_streams(mt_engine *e) {
    for (int s = 0; s < MT_NUM_STREAMS; s++) MT_TRY(mt_backend_stream_sync(e->be, (mt_stream_id)s));
    return MT_OK;
}

// A rank other than the leader, on its own thread: its walk, its drains, its streams.
typedef struct {
    mt_engine *e;
    mt_collective *coll;
    const int32_t *inputs, *targets;
    int step;
    mt_status status;
    char error[1024];
} rank_job;

// A rank other than the leader: begun, walked, its drains waited for (its gradients have
// landed), its streams synced and its timeline closed.
static mt_status rank_run(rank_job *j) {
    mt_engine *e = j->e;
    mt_collective *coll = j->coll;
    if (coll->bind) MT_TRY(coll->bind(coll, e->rank)); // this thread issues to the rank's device
    MT_TRY(rank_begin(e, j->inputs, j->targets, j->step));
    MT_TRY(rank_walk(e));
    double wait_ms;
    MT_TRY(mt_grad_offload_drained(e->grads, &wait_ms));
    MT_TRY(sync_streams(e));
    mt_phase_times ph;
    return mt_trace_step_end(e->trace, &ph);
}

static void *rank_thread(void *arg) {
    rank_job *j = arg;
    j->status = rank_run(j);
    if (j->status != MT_OK) {
        snprintf(j->error, sizeof j->error, "rank %d: %s", j->e->rank, mt_last_error());
        if (j->coll->abort) j->coll->abort(j->coll); // the others may wait for what this rank will not land
    }
    return NULL;
}

// --gpus N: ranks 1..N-1 run on their own threads while the leader walks rank 0 here
// (begun already); on return every rank's gradients have landed in the host state.
static mt_status walk_all_ranks(mt_engine *e, const int32_t *inputs, const int32_t *targets, int step) {
    int R = e->n_ranks, started = 0;
    rank_job jobs[R];
    pthread_t th[R];
    mt_status s = MT_OK;
    for (int r = 1; r < R; r++) {
        jobs[r] = (rank_job){.e = e->ranks[r], .coll = e->coll, .inputs = inputs, .targets = targets, .step = step};
        if (pthread_create(&th[r], NULL, rank_thread, &jobs[r]) != 0) {
            s = mt_fail(MT_ERR_BACKEND, "cannot start the thread of rank %d", r);
            break;
        }
        started = r;
    }
    if (s == MT_OK) s = rank_walk(e); // the leader's drains are waited for with the norm (mt_grad_offload_finish)
    char first[1100] = "";
    if (s != MT_OK) {
        snprintf(first, sizeof first, "rank 0: %s", mt_last_error());
        if (e->coll->abort) e->coll->abort(e->coll); // the others may wait for what rank 0 will not land
    }
    for (int r = 1; r <= started; r++) {
        pthread_join(th[r], NULL);
        if (jobs[r].status != MT_OK && s == MT_OK) {
            s = jobs[r].status;
            snprintf(first, sizeof first, "%s", jobs[r].error);
        }
    }
    if (s != MT_OK) { // the leader's own drains land nothing more; wait for them before saying why
        double wait_ms;
        (void)mt_grad_offload_drained(e->grads, &wait_ms);
        return mt_fail(s, "%s", first);
    }
    return MT_OK;
}

// Several hosts: every unit's gradient summed across them in host order (hosts.h); the
// norm is then the sum's, taken as the drain takes it, unit by unit in order.
// Sharded (host_shard.h): each host sums only the slice it updates, and the norm is every
// slice's sum of squares added in host order, then unit order.
// Gradients sliced too (collective_hosts.c): the drains summed every unit already, slice by owner.
static mt_status sum_hosts(mt_engine *e, double *sumsq) {
    double sq = 0, slices[e->model->n_units];
    if (e->model->slice.grads) MT_TRY(mt_collective_hosts_status(e->coll));
    for (int u = 0; e->model->slice.grads && u < e->model->n_units; u++)
        slices[u] = mt_grad_offload_unit_sumsq(e->grads, u);
    for (int u = 0; !e->model->slice.grads && u < e->model->n_units; u++) {
        mt_unit *x = &e->model->units[u];
        size_t n = x->lay->numel, off = 0, cnt = n;
        if (!e->shard_opt) MT_TRY(e->hosts->reduce_grad(e->hosts, x->grad, e->model->wdt, n));
        else {
            MT_TRY(e->hosts->reduce_scatter(e->hosts, x->grad, e->model->wdt, n));
            mt_host_shard_range(n, e->hosts->n, e->hosts->rank, &off, &cnt);
        }
        slices[u] = mt_grad_sumsq((char *)x->grad + off * mt_dtype_size(e->model->wdt), e->model->wdt, cnt);
    }
    if (e->shard_opt) MT_TRY(e->hosts->sum_f64(e->hosts, slices, e->model->n_units));
    for (int u = 0; u < e->model->n_units; u++) sq += slices[u];
    *sumsq = sq;
    return MT_OK;
}

// Sharded: the step's update done, every host's updated slice of the streamed parameters
// to every host before the next forward reads them.
mt_status mt_engine_publish_unit(void *engine, int u) {
    mt_engine *e = engine;
    mt_unit *x = &e->model->units[u];
    return e->hosts->all_gather_worker(e->hosts, x->param, mt_dtype_size(e->model->wdt), x->lay->numel);
}

static mt_status gather_params(mt_engine *e, double *wait_ms) {
    *wait_ms += mt_opt_worker_wait_all(e->opt);
    for (int u = 0; u < e->model->n_units; u++) {
        mt_unit *x = &e->model->units[u];
        MT_TRY(e->hosts->all_gather(e->hosts, x->param, mt_dtype_size(e->model->wdt), x->lay->numel));
    }
    return MT_OK;
}

mt_status mt_engine_step(mt_engine *e, const int32_t *inputs, const int32_t *targets, const mt_optim_hparams *hp,
                         float lr, int step, mt_step_stats *st) {
    memset(st, 0, sizeof *st);
    const int G = e->sh.G, N = e->dims.N, R = e->n_ranks;
    mt_activations *a = e->acts;
    if (e->shard_opt) MT_TRY(mt_opt_worker_status(e->opt, 0)); // a hosts' gather of the last pass failed
    if (R > 1 && e->coll->bind) MT_TRY(e->coll->bind(e->coll, 0)); // this thread issues to rank 0's device
    MT_TRY(rank_begin(e, inputs, targets, step));
    // Adam counts the updates it applied: skipped steps are not among them (GradScaler's way).
    int adam_step = step - hp->skipped_before;
    if (e->sched->speculative && !(e->spec_gated && e->last_clipped)) {
        mt_adamw_hparams hs = {.lr = lr, .beta1 = hp->beta1, .beta2 = hp->beta2, .eps = hp->eps, .grad_scale = 1.0f,
                               .step = adam_step};
        mt_opt_worker_speculate(e->opt, &hs, hp->weight_decay, hp->grad_clip);
    }
    if (R == 1) MT_TRY(rank_walk(e));
    else MT_TRY(walk_all_ranks(e, inputs, targets, step)); // every other rank's gradients have landed
    double sq;
    MT_TRY(mt_grad_offload_finish(e->grads, &st->drain_wait_ms, &sq)); // the norm: every unit's, once, in unit order
    MT_TRY(sync_streams(e));
    if (e->hosts) MT_TRY(sum_hosts(e, &sq));
    const float *losses = a->h_losses;
    if (R > 1) { // in the order one rank would hold them: micro-batch, then rank
        for (int g = 0; g < G; g++)
            for (int r = 0; r < R; r++)
                memcpy(e->h_losses_all + ((size_t)g * R + r) * N, e->ranks[r]->acts->h_losses + (size_t)g * N,
                       (size_t)N * sizeof(float));
        losses = e->h_losses_all;
    }
    int H = e->hosts ? e->hosts->n : 1;
    if (H > 1) { // every host's, then in micro-batch, host, rank order
        size_t mine = (size_t)G * R * N;
        MT_TRY(e->hosts->gather(e->hosts, losses, mine, e->h_losses_hosts));
        for (int g = 0; g < G; g++)
            for (int h = 0; h < H; h++)
                memcpy(e->h_losses_all + ((size_t)g * H + h) * R * N, e->h_losses_hosts + h * mine + (size_t)g * R * N,
                       (size_t)R * N * sizeof(float));
        losses = e->h_losses_all;
    }
    st->loss = e->model->host.mean_loss(&e->model->host, losses, (size_t)G * H * R * N); // NaN where no data exists
    st->grad_norm = sqrt(sq);
    st->tokens = (long long)G * H * R * N;
    // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1.
    st->clip_factor = 1.0;
    if (hp->grad_clip > 0) {
        float coef = (float)(hp->grad_clip / ((float)st->grad_norm + 1e-6));
        st->clip_factor = coef < 1.0f ? coef : 1.0f;
    }
    // The non-finite policy (both paths): a non-finite global norm skips the step.
    st->skipped = !isfinite(st->grad_norm);
    if (st->skipped) st->clip_factor = 1.0;
    e->last_clipped = st->skipped || st->clip_factor < 1.0;
    mt_adamw_hparams h = {.lr = lr, .beta1 = hp->beta1, .beta2 = hp->beta2, .eps = hp->eps,
                          .grad_scale = (float)st->clip_factor, .step = adam_step};
    // Before the step's timeline closes: what was speculated under the backward is settled
    // (and, in virtual time, traced) by then; the update itself starts after it, as before.
    mt_opt_worker_settle(e->opt, &h, hp->weight_decay, st->skipped, &st->spec_units, &st->rollbacks);
    mt_phase_times ph;
    MT_TRY(mt_trace_step_end(e->trace, &ph));
    st->compute_ms = ph.busy_ms[MT_LANE_COMPUTE];
    st->h2d_ms = ph.busy_ms[MT_LANE_H2D];
    st->d2h_ms = ph.busy_ms[MT_LANE_D2H];
    st->drain_ms = ph.busy_ms[MT_LANE_DRAIN];
    st->optimizer_ms = ph.busy_ms[MT_LANE_OPTIMIZER];
    st->span_ms = ph.step_ms;
    st->h2d_bytes = e->link.bytes[0];
    st->d2h_bytes = e->link.bytes[1];
    for (int r = 1; r < R; r++) { // the link's bytes of every rank; the busy times above are rank 0's
        st->h2d_bytes += e->ranks[r]->link.bytes[0];
        st->d2h_bytes += e->ranks[r]->link.bytes[1];
    }
    st->opt_wait_ms = mt_weight_ring_take_opt_wait(e->ring);

    mt_weight_ring_hand_over_rows(e->ring); // the rows mt_engine_next_inputs named, if it was called
    mt_opt_worker_start(e->opt);
    MT_TRY(mt_devopt_step(e->devopt, &h, hp->weight_decay, st->skipped)); // beside the host's pass
    if (!e->sched->optimizer_overlapped) st->opt_wait_ms += mt_opt_worker_wait_all(e->opt);
    if (e->shard_opt && !e->hosts->all_gather_worker) MT_TRY(gather_params(e, &st->opt_wait_ms));
    e->step_done++;
    return MT_OK;
}

void mt_engine_next_inputs(mt_engine *e, const int32_t *next) {
    const int G = e->sh.G, N = e->dims.N, R = e->n_ranks;
    const int32_t *spans[G * R];
    for (int r = 0; r < R; r++) { // this host's ranks' slices of every micro-batch
        const mt_engine *x = e->ranks ? e->ranks[r] : e;
        for (int g = 0; g < G; g++) spans[r * G + g] = next + ((size_t)g * x->n_slices + x->slice) * N;
    }
    mt_weight_ring_announce(e->ring, spans, G * R, (size_t)N);
}

double mt_engine_now_ms(const mt_engine *e) { return mt_trace_host_now(e->trace); }

mt_status mt_engine_write_trace(mt_engine *e, const char *path) { return mt_trace_write(e->trace, path); }

mt_status mt_engine_finish(mt_engine *e) {
    MT_TRY(mt_opt_worker_status(e->opt, 1)); // waits for the pass, and says if its hosts' gather failed
    return mt_devopt_copy_out(e->devopt);    // the device's units into the host state a save writes
}

mt_status mt_engine_eval(mt_engine *e, const int32_t *inputs, const int32_t *targets, double *loss_sum) {
    mt_activations *a = e->acts;
    const int N = e->dims.N;
    memcpy(a->h_ids, inputs, (size_t)N * 4);
    memcpy(a->h_tgt, targets, (size_t)N * 4);
    mt_weight_ring_rewind(e->ring);
    MT_TRY(mt_trace_step_begin(e->trace, 0)); // also recycles the trace's events, eval after eval
    int cursor = 0;
    MT_TRY(forward(e, 0, 1, &cursor));
    MT_TRY(mt_head_forward_backward(e, 0, 0, 1.0f));
    MT_TRY(mt_backend_copy(e->be, a->h_losses, a->losses, (size_t)N * 4, MT_COPY_D2H, MT_STREAM_COMPUTE));
    for (int s = 0; s < MT_NUM_STREAMS; s++) MT_TRY(mt_backend_stream_sync(e->be, (mt_stream_id)s));
    mt_phase_times ph;
    MT_TRY(mt_trace_step_end(e->trace, &ph));
    double s = 0;
    for (int i = 0; i < N; i++) s += a->h_losses[i];
    *loss_sum = s;
    return MT_OK;
}
