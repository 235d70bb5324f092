// engine.c: validating the options, sizing and allocating the device side.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/rope_table.h"

static const char *schedule_names[] = {"megatrain", "resident", "zero3", "naive"};

mt_status mt_schedule_parse(const char *s, mt_schedule *out) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, schedule_names[i])) {
            *out = (mt_schedule)i;
            return MT_OK;
        }
    return mt_fail(MT_ERR_ARG, "--schedule: unknown value '%s' (expected megatrain, zero3, naive or resident)", s);
}

const char *mt_schedule_name(mt_schedule s) { return schedule_names[s]; }

mt_status mt_grad_sum_parse(const char *s, mt_grad_sum *out) {
    if (!strcmp(s, "auto")) *out = MT_GRAD_SUM_AUTO;
    else if (!strcmp(s, "f32")) *out = MT_GRAD_SUM_F32;
    else if (!strcmp(s, "bf16")) *out = MT_GRAD_SUM_BF16;
    else return mt_fail(MT_ERR_ARG, "--grad-accum-dtype: unknown value '%s' (expected auto, f32 or bf16)", s);
    return MT_OK;
}

mt_zero3_knobs mt_zero3_defaults(void) {
    return (mt_zero3_knobs){.pin_memory = 1, .overlap_comm = 1, .prefetch_bucket_size = 50000000LL,
                            .param_persistence_threshold = 100000LL, .reduce_bucket_size = 500000000LL,
                            .max_live_parameters = 1000000000LL};
}

// The schedule's resolved shape: buffers, prefetch depth, checkpointing, streams.
typedef struct {
    int n_wbuf, lookahead, K, n_ckpt, n_acts, overlap_optimizer;
    mt_stream_id h2d, d2h;
    mt_dtype link_dtype; // gradients crossing the link
} schedule_shape;

static schedule_shape shape_of(const mt_config *c, mt_precision p, const mt_engine_opts *o) {
    int L = c->num_layers;
    schedule_shape s = {.n_wbuf = o->weight_bufs, .K = o->ckpt_interval, .overlap_optimizer = o->overlap_optimizer,
                        .h2d = MT_STREAM_H2D, .d2h = MT_STREAM_D2H, .link_dtype = mt_precision_wdt(p)};
    switch (o->schedule) {
    case MT_SCHED_MEGATRAIN: break;
    case MT_SCHED_RESIDENT:
        s.n_wbuf = L, s.K = 1, s.overlap_optimizer = 0;
        break;
    case MT_SCHED_NAIVE:
        s.n_wbuf = 1, s.overlap_optimizer = 0, s.h2d = s.d2h = MT_STREAM_COMPUTE;
        break;
    case MT_SCHED_ZERO3: {
        // Whole layers ahead as the prefetch bucket allows (at least the next one,
        // whose fetch the bucket then covers only in part), bounded by max live params.
        mt_unit_layout le, ll, lh;
        mt_layout_build(c, &le, &ll, &lh);
        long long layer = (long long)ll.numel, ahead = (o->zero3.prefetch_bucket_size + layer - 1) / layer;
        long long live = o->zero3.max_live_parameters / layer;
        if (ahead > 2) ahead = 2;
        if (ahead > live - 1) ahead = live - 1;
        if (ahead < 1) ahead = 1;
        s.n_wbuf = 1 + (int)ahead, s.K = 1, s.overlap_optimizer = 0, s.link_dtype = MT_F32;
        if (!o->zero3.overlap_comm) s.d2h = MT_STREAM_COMPUTE;
        break;
    }
    }
    if (s.n_wbuf > L) s.n_wbuf = L;
    int resident = o->schedule == MT_SCHED_RESIDENT;
    s.lookahead = s.n_wbuf - 1;
    s.n_ckpt = resident ? L : (L + s.K - 1) / s.K;
    s.n_acts = resident ? L : 1;
    return s;
}

mt_status mt_engine_dev_alloc(mt_engine *e, size_t bytes, void **out) {
    if (bytes == 0) bytes = 64;
    MT_TRY(e->be->ops->dev_alloc(e->be, bytes, out));
    e->dev_allocs[e->n_dev_allocs++] = *out;
    return MT_OK;
}

static size_t al(size_t b) { return (b + 255) / 256 * 256; }

// Loss-head rows per chunk: at most 256 MiB of logits at a time. Fewer chunks
// also means fewer roundings of the head's bf16 gradient, which accumulates
// across chunks (in paper/mixed precision the gradient itself is bf16).
static int loss_chunk_rows(const mt_config *c, int N, size_t act_size) {
    size_t rows = (256u << 20) / ((size_t)c->vocab_size * act_size);
    return (int)(rows < 1 ? 1 : rows > (size_t)N ? (size_t)N : rows);
}


static mt_memory_plan memory_plan(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act,
                                  int offload, int f32_sum);

// Elements of the f32 buffer a chunked weight gradient is summed in: the larger of the
// MLP's (gate, up and down: 3 F C) and the LM head's (V C), each only when it runs in
// more than one chunk. 0 where weight gradients are f32 already.
static size_t grad_sum_elems(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act) {
    if (mt_precision_wdt(p) == MT_F32) return 0;
    long long N = (long long)o->B * o->T, C = c->hidden_size;
    size_t mlp = o->mlp_rows > 0 && o->mlp_rows < N ? (size_t)3 * c->intermediate_size * C : 0;
    size_t head = loss_chunk_rows(c, (int)N, mt_dtype_size(act)) < N ? (size_t)c->vocab_size * C : 0;
    return mlp > head ? mlp : head;
}

static mt_memory_plan resolve_offload(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act,
                                      size_t device_free, int f32_sum) {
    int offload = o->offload_checkpoints > 0 && o->schedule != MT_SCHED_RESIDENT;
    if (o->offload_checkpoints < 0 && o->schedule != MT_SCHED_RESIDENT && device_free)
        offload = memory_plan(c, p, o, act, 0, f32_sum).device_bytes > device_free;
    return memory_plan(c, p, o, act, offload, f32_sum);
}

mt_memory_plan mt_engine_memory_plan(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act,
                                     size_t device_free) {
    int f32_sum = o->grad_sum != MT_GRAD_SUM_BF16;
    mt_memory_plan m = resolve_offload(c, p, o, act, device_free, f32_sum);
    // AUTO gives the f32 buffer up (back to the official code's bf16 sum) rather than not fit.
    if (o->grad_sum == MT_GRAD_SUM_AUTO && m.grad_sum_bytes && device_free && m.device_bytes > device_free)
        m = resolve_offload(c, p, o, act, device_free, 0);
    return m;
}

static mt_memory_plan memory_plan(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act,
                                  int offload, int f32_sum) {
    mt_unit_layout le, ll, lh;
    mt_layout_build(c, &le, &ll, &lh);
    schedule_shape sh = shape_of(c, p, o);
    int K = sh.K;
    size_t ws = mt_dtype_size(mt_precision_wdt(p)), as = mt_dtype_size(act), ls = mt_dtype_size(sh.link_dtype);
    mt_dims d = {.B = o->B, .T = o->T, .N = o->B * o->T, .C = c->hidden_size, .F = c->intermediate_size,
                 .NH = c->num_heads, .NKV = c->num_kv_heads, .HD = c->head_dim,
                 .QKV = c->num_heads + 2 * c->num_kv_heads, .qk_norm = c->qk_norm, .mlp_rows = o->mlp_rows};
    size_t x = al((size_t)d.N * d.C * as);
    int n_wbuf = sh.n_wbuf, n_ckpt = sh.n_ckpt, n_acts = sh.n_acts;
    mt_memory_plan m = {0};
    m.weights_bytes = (size_t)(n_wbuf + (o->copy_bind ? 1 : 0)) * al(ll.numel * ws) + al(le.numel * ws) + al(lh.numel * ws);
    size_t slab = ll.numel > le.numel ? ll.numel : le.numel;
    if (lh.numel > slab) slab = lh.numel;
    m.grads_bytes = 2 * al(ll.numel * ws) + al(le.numel * ws) + al(lh.numel * ws);
    if (sh.link_dtype != mt_precision_wdt(p)) m.grads_bytes += al(slab * ls); // f32 staging for the offload
    m.grad_sum_f32 = f32_sum || mt_precision_wdt(p) == MT_F32;
    m.grad_sum_bytes = f32_sum ? al(grad_sum_elems(c, p, o, act) * 4) : 0;
    m.grads_bytes += m.grad_sum_bytes;
    m.offload_checkpoints = offload && n_ckpt > MT_CKPT_SLOTS;
    m.checkpoint_bytes = (size_t)(m.offload_checkpoints ? MT_CKPT_SLOTS : n_ckpt) * x;
    m.checkpoint_host_bytes = m.offload_checkpoints ? (size_t)n_ckpt * x : 0;
    // x buffers: K-1 block inputs and 2 non-checkpoint outputs (K > 1 only), plus the last
    // layer's output and the flowing gradient (the head borrows the layer scratch).
    m.activation_bytes = (size_t)((K - 1) + (K > 1 ? 2 : 0) + 2) * x + (size_t)n_acts * mt_layer_acts_bytes(&d, act) +
                         mt_layer_scratch_bytes(&d, act) + al((size_t)loss_chunk_rows(c, d.N, as) * c->vocab_size * as) +
                         4 * al((size_t)d.N * 4) + 2 * al((size_t)d.T * d.HD / 2 * 4);
    m.device_bytes = m.weights_bytes + m.grads_bytes + m.checkpoint_bytes + m.activation_bytes;
    m.state_bytes = mt_model_host_bytes(c, p);
    m.staging_bytes = (size_t)o->grad_slabs * slab * ls + 3 * (size_t)o->grad_accum * d.N * 4;
    m.host_bytes = m.state_bytes + m.staging_bytes + m.checkpoint_host_bytes;
    m.pinned_bytes = mt_model_pinned_bytes(c, p) + m.staging_bytes + m.checkpoint_host_bytes; // moments are pageable
    return m;
}

// Piece boundaries of a layer load: the whole layer, or (zero3) one piece per
// submodule: each starts at a group's first tensor and runs to the next group.
static void layer_pieces(mt_engine *e) {
    const mt_unit_layout *l = &e->m->lay_layer;
    e->n_pieces = 0;
    e->pieces[e->n_pieces++] = 0;
    if (e->o.schedule == MT_SCHED_ZERO3) {
        const mt_tensor_id starts[] = {MT_T_Q, MT_T_QB, MT_T_QNORM, MT_T_KNORM, MT_T_O, MT_T_LN2, MT_T_GATE, MT_T_DOWN};
        for (size_t i = 0; i < sizeof starts / sizeof *starts; i++)
            if (l->t[starts[i]].present) e->pieces[e->n_pieces++] = l->t[starts[i]].offset;
    }
    e->pieces[e->n_pieces] = l->numel;
}

mt_status mt_engine_create(mt_model *m, mt_backend *be, const mt_engine_opts *o, mt_engine **out) {
    const mt_config *c = &m->cfg;
    if (o->B <= 0) return mt_fail(MT_ERR_ARG, "--batch: must be positive (got %d)", o->B);
    if (o->T <= 0) return mt_fail(MT_ERR_ARG, "--seq-len: must be positive (got %d)", o->T);
    if (o->grad_accum <= 0) return mt_fail(MT_ERR_ARG, "--grad-accum: must be positive (got %d)", o->grad_accum);
    if (o->ckpt_interval <= 0 || o->ckpt_interval > c->num_layers)
        return mt_fail(MT_ERR_ARG, "--checkpoint-interval: must be in 1..%d (the layer count), got %d", c->num_layers,
                       o->ckpt_interval);
    if (o->weight_bufs < 1 || o->weight_bufs > 3) // 1 = no prefetch (the ablation's floor)
        return mt_fail(MT_ERR_ARG, "--weight-buffers: must be 1, 2 or 3 (got %d)", o->weight_bufs);
    if (o->grad_slabs < 1 || o->grad_slabs > 64)
        return mt_fail(MT_ERR_ARG, "--grad-slabs: must be in 1..64 (got %d)", o->grad_slabs);
    if ((long long)o->B * o->T > 1LL << 30)
        return mt_fail(MT_ERR_ARG, "--batch x --seq-len: %lld tokens per micro-batch is too many", (long long)o->B * o->T);

    mt_engine *e = calloc(1, sizeof *e);
    if (!e) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the engine");
    *out = e;
    e->m = m;
    e->be = be;
    e->o = *o;
    e->L = c->num_layers;
    e->act = be->act_dtype;
    e->act_size = mt_dtype_size(e->act);
    e->acts_layer = -1;
    e->d = (mt_dims){.B = o->B, .T = o->T, .N = o->B * o->T, .C = c->hidden_size, .F = c->intermediate_size,
                     .NH = c->num_heads, .NKV = c->num_kv_heads, .HD = c->head_dim,
                     .QKV = c->num_heads + 2 * c->num_kv_heads, .eps = c->rms_norm_eps, .qk_norm = c->qk_norm,
                     .bias = c->attention_bias, .mlp_rows = o->mlp_rows, .wdt = m->wdt};
    if (o->schedule == MT_SCHED_ZERO3) {
        const mt_zero3_knobs *z = &o->zero3;
        if (z->prefetch_bucket_size <= 0 || z->param_persistence_threshold < 0 || z->reduce_bucket_size <= 0 ||
            z->max_live_parameters <= 0)
            return mt_fail(MT_ERR_ARG, "--zero3-*: bucket sizes and max live parameters must be positive");
    }
    schedule_shape sh = shape_of(c, m->prec, o);
    e->o.ckpt_interval = sh.K;
    e->o.overlap_optimizer = sh.overlap_optimizer;
    e->n_wbuf = sh.n_wbuf;
    e->n_ckpt = sh.n_ckpt;
    e->n_acts = sh.n_acts;
    e->lookahead = sh.lookahead;
    e->h2d = sh.h2d;
    e->d2h = sh.d2h;
    e->link_dtype = sh.link_dtype;
    e->chunk_rows = loss_chunk_rows(c, e->d.N, e->act_size);

    mt_device_info info;
    MT_TRY(be->ops->device_info(be, &info));
    mt_memory_plan mp = mt_engine_memory_plan(c, m->prec, o, e->act, info.mem_free_bytes);
    size_t need = mp.device_bytes;
    e->ck_offload = mp.offload_checkpoints;
    e->o.grad_sum = mp.grad_sum_f32 ? MT_GRAD_SUM_F32 : MT_GRAD_SUM_BF16;
    if (info.mem_free_bytes && need > info.mem_free_bytes)
        return mt_fail(MT_ERR_MEMORY,
                       "device memory: batch %d x seq %d with the %s schedule needs %.2f GiB but %s has %.2f GiB free; "
                       "lower --batch or --seq-len",
                       o->B, o->T, mt_schedule_name(o->schedule), need / 1073741824.0, info.name,
                       info.mem_free_bytes / 1073741824.0);

    e->dev_allocs = calloc(64 + (size_t)e->n_wbuf + (size_t)e->n_ckpt + (size_t)e->n_acts, sizeof(void *));
    e->wbuf = calloc((size_t)e->n_wbuf, sizeof(void *));
    e->ev_loaded = calloc((size_t)e->n_wbuf, sizeof(mt_event *));
    e->ev_free = calloc((size_t)e->n_wbuf, sizeof(mt_event *));
    e->ckpt = calloc((size_t)e->n_ckpt, sizeof(void *));
    e->blk_in = calloc((size_t)e->o.ckpt_interval, sizeof(void *));
    e->acts = calloc((size_t)e->n_acts, sizeof(mt_layer_acts));
    e->sumsq = calloc((size_t)m->n_units, sizeof(double));
    if (!e->dev_allocs || !e->wbuf || !e->ev_loaded || !e->ev_free || !e->ckpt || !e->blk_in || !e->acts || !e->sumsq)
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the engine tables");

    const mt_backend_ops *bo = be->ops;
    size_t ws = mt_dtype_size(m->wdt), x_bytes = (size_t)e->d.N * c->hidden_size * e->act_size;
    for (int i = 0; i < e->n_wbuf; i++) {
        MT_TRY(mt_engine_dev_alloc(e, m->lay_layer.numel * ws, &e->wbuf[i]));
        MT_TRY(bo->event_create(be, &e->ev_loaded[i]));
        MT_TRY(bo->event_create(be, &e->ev_free[i]));
    }
    for (int i = 0; i < 2; i++) {
        MT_TRY(mt_engine_dev_alloc(e, m->lay_layer.numel * ws, &e->gbuf[i]));
        MT_TRY(bo->event_create(be, &e->ev_gfree[i]));
    }
    if (e->link_dtype != m->wdt) { // zero3 offloads f32 gradients: device staging buffers to cast into
        size_t big = m->lay_layer.numel > m->lay_embed.numel ? m->lay_layer.numel : m->lay_embed.numel;
        if (m->lay_head.numel > big) big = m->lay_head.numel;
        for (int i = 0; i < 2; i++) {
            MT_TRY(mt_engine_dev_alloc(e, big * 4, &e->link_buf[i]));
            MT_TRY(bo->event_create(be, &e->ev_link_free[i]));
        }
    }
    if (o->copy_bind) MT_TRY(mt_engine_dev_alloc(e, m->lay_layer.numel * ws, &e->template_buf));
    layer_pieces(e);
    MT_TRY(mt_engine_dev_alloc(e, m->lay_embed.numel * ws, &e->embed_w));
    MT_TRY(mt_engine_dev_alloc(e, m->lay_embed.numel * ws, &e->embed_g));
    MT_TRY(mt_engine_dev_alloc(e, m->lay_head.numel * ws, &e->head_w));
    MT_TRY(mt_engine_dev_alloc(e, m->lay_head.numel * ws, &e->head_g));
    // Backward never writes the padding between tensor groups; zero it once so
    // offloaded gradients (and their norm) see zeros there.
    void *gz[] = {e->gbuf[0], e->gbuf[1], e->embed_g, e->head_g};
    size_t gzb[] = {m->lay_layer.numel * ws, m->lay_layer.numel * ws, m->lay_embed.numel * ws, m->lay_head.numel * ws};
    for (int i = 0; i < 4; i++) MT_TRY(bo->memset_zero(be, gz[i], gzb[i], MT_STREAM_COMPUTE));
    mt_event **evs[] = {&e->ev_embed_loaded, &e->ev_head_loaded, &e->ev_embed_gfree, &e->ev_head_gfree, &e->ev_ready};
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++) MT_TRY(bo->event_create(be, evs[i]));

    if (e->ck_offload) { // checkpoints in pinned host memory, three device slots
        e->ck_host = calloc((size_t)e->n_ckpt, sizeof(void *));
        if (!e->ck_host) return mt_fail(MT_ERR_MEMORY, "host memory: checkpoint table");
        MT_TRY(mt_host_budget_check(mp.checkpoint_host_bytes + mp.state_bytes, info.host_mem_avail_bytes, 0,
                                    "offloaded checkpoints with the model state"));
        for (int i = 0; i < e->n_ckpt; i++) MT_TRY(bo->host_alloc(be, x_bytes, &e->ck_host[i]));
        for (int i = 0; i < MT_CKPT_SLOTS; i++) {
            MT_TRY(mt_engine_dev_alloc(e, x_bytes, &e->ck_dev[i]));
            MT_TRY(bo->event_create(be, &e->ev_ck_free[i]));
            MT_TRY(bo->event_create(be, &e->ev_ck_out[i]));
            MT_TRY(bo->event_create(be, &e->ev_ck_in[i]));
        }
        MT_TRY(bo->event_create(be, &e->ev_ck_ready));
    } else {
        for (int i = 0; i < e->n_ckpt; i++) MT_TRY(mt_engine_dev_alloc(e, x_bytes, &e->ckpt[i]));
    }
    for (int i = 1; i < e->o.ckpt_interval; i++) MT_TRY(mt_engine_dev_alloc(e, x_bytes, &e->blk_in[i]));
    if (e->o.ckpt_interval > 1) // outputs that are not checkpoints exist only with K > 1
        for (int i = 0; i < 2; i++) MT_TRY(mt_engine_dev_alloc(e, x_bytes, &e->x_tmp[i]));
    MT_TRY(mt_engine_dev_alloc(e, x_bytes, &e->x_final));
    MT_TRY(mt_engine_dev_alloc(e, x_bytes, &e->dx));

    for (int i = 0; i < e->n_acts; i++) {
        void *mem;
        MT_TRY(mt_engine_dev_alloc(e, mt_layer_acts_bytes(&e->d, e->act), &mem));
        mt_layer_acts_carve(&e->d, e->act, mem, &e->acts[i]);
    }
    void *smem;
    MT_TRY(mt_engine_dev_alloc(e, mt_layer_scratch_bytes(&e->d, e->act), &smem));
    mt_layer_scratch_carve(&e->d, e->act, smem, &e->scratch);
    // The loss head runs while no layer does: its normed input and that input's
    // gradient borrow the layers' (N, C) scratch.
    e->xn = e->scratch.dtmp;
    e->dxn = e->scratch.dln;
    if (mp.grad_sum_bytes) MT_TRY(mt_engine_dev_alloc(e, mp.grad_sum_bytes, (void **)&e->grad_sum));
    e->scratch.grad_sum = e->grad_sum; // the head and each layer's MLP use it in turn, never at once
    MT_TRY(mt_head_size_chunk(e)); // the plan's chunk is the floor; a device grows it into free memory
    MT_TRY(mt_engine_dev_alloc(e, (size_t)e->chunk_rows * c->vocab_size * e->act_size, &e->logits));
    MT_TRY(mt_engine_dev_alloc(e, (size_t)e->d.N * 4, (void **)&e->rstd_final));
    MT_TRY(mt_engine_dev_alloc(e, (size_t)e->d.N * 4, (void **)&e->losses));
    MT_TRY(mt_engine_dev_alloc(e, (size_t)e->d.N * 4, (void **)&e->d_ids));
    MT_TRY(mt_engine_dev_alloc(e, (size_t)e->d.N * 4, (void **)&e->d_tgt));

    // RoPE tables: computed once on the host, copied once.
    size_t rope_n = (size_t)o->T * c->head_dim / 2;
    float *hc = malloc(rope_n * 4), *hs = malloc(rope_n * 4);
    if (!hc || !hs) {
        free(hc);
        free(hs);
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate RoPE tables");
    }
    mt_rope_tables(c, o->T, hc, hs);
    mt_status s = mt_engine_dev_alloc(e, rope_n * 4, (void **)&e->rope_cos);
    if (s == MT_OK) s = mt_engine_dev_alloc(e, rope_n * 4, (void **)&e->rope_sin);
    if (s == MT_OK) s = bo->copy(be, e->rope_cos, hc, rope_n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE);
    if (s == MT_OK) s = bo->copy(be, e->rope_sin, hs, rope_n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE);
    if (s == MT_OK) s = bo->stream_sync(be, MT_STREAM_COMPUTE);
    free(hc);
    free(hs);
    MT_TRY(s);
    e->d.rope_cos = e->rope_cos;
    e->d.rope_sin = e->rope_sin;

    size_t stage = (size_t)o->grad_accum * e->d.N * 4;
    MT_TRY(bo->host_alloc(be, stage, (void **)&e->h_ids));
    MT_TRY(bo->host_alloc(be, stage, (void **)&e->h_tgt));
    MT_TRY(bo->host_alloc(be, stage, (void **)&e->h_losses));

    size_t slab = m->lay_layer.numel;
    if (m->lay_embed.numel > slab) slab = m->lay_embed.numel;
    if (m->lay_head.numel > slab) slab = m->lay_head.numel;
    MT_TRY(mt_trace_create(be, o->keep_trace, &e->trace));
    MT_TRY(mt_drain_create(be, o->grad_slabs, slab * mt_dtype_size(e->link_dtype), &e->drain));
    mt_drain_set_trace(e->drain, e->trace, &e->d2h_bytes);
    MT_TRY(mt_opt_worker_create(m, &e->opt));
    mt_opt_worker_set_trace(e->opt, e->trace);
    return mt_plan_build(e);
}

mt_grad_sum mt_engine_grad_sum(const mt_engine *e) { return e->o.grad_sum; }

void mt_engine_destroy(mt_engine *e) {
    if (!e) return;
    mt_backend *be = e->be;
    if (e->opt) mt_opt_worker_destroy(e->opt);
    if (e->drain) mt_drain_destroy(e->drain);
    mt_trace_destroy(e->trace);
    be->ops->stream_sync(be, MT_STREAM_COMPUTE);
    be->ops->stream_sync(be, MT_STREAM_H2D);
    be->ops->stream_sync(be, MT_STREAM_D2H);
    for (int i = 0; i < e->n_dev_allocs; i++) be->ops->dev_free(be, e->dev_allocs[i]);
    for (int i = 0; i < e->n_wbuf; i++) {
        if (e->ev_loaded && e->ev_loaded[i]) be->ops->event_destroy(be, e->ev_loaded[i]);
        if (e->ev_free && e->ev_free[i]) be->ops->event_destroy(be, e->ev_free[i]);
    }
    for (int i = 0; i < 2; i++)
        if (e->ev_gfree[i]) be->ops->event_destroy(be, e->ev_gfree[i]);
    mt_event *evs[] = {e->ev_embed_loaded, e->ev_head_loaded, e->ev_embed_gfree, e->ev_head_gfree, e->ev_ready,
                       e->ev_link_free[0], e->ev_link_free[1]};
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
        if (evs[i]) be->ops->event_destroy(be, evs[i]);
    for (int i = 0; i < MT_CKPT_SLOTS; i++) {
        mt_event *ck[] = {e->ev_ck_free[i], e->ev_ck_out[i], e->ev_ck_in[i]};
        for (int k = 0; k < 3; k++)
            if (ck[k]) be->ops->event_destroy(be, ck[k]);
    }
    if (e->ev_ck_ready) be->ops->event_destroy(be, e->ev_ck_ready);
    if (e->ck_host) {
        size_t x_bytes = (size_t)e->d.N * e->d.C * e->act_size;
        for (int i = 0; i < e->n_ckpt; i++)
            if (e->ck_host[i]) be->ops->host_free(be, e->ck_host[i], x_bytes);
        free(e->ck_host);
    }
    size_t stage = (size_t)e->o.grad_accum * e->d.N * 4;
    if (e->h_ids) be->ops->host_free(be, e->h_ids, stage);
    if (e->h_tgt) be->ops->host_free(be, e->h_tgt, stage);
    if (e->h_losses) be->ops->host_free(be, e->h_losses, stage);
    free(e->dev_allocs);
    free(e->wbuf);
    free(e->ev_loaded);
    free(e->ev_free);
    free(e->ckpt);
    free(e->blk_in);
    free(e->acts);
    free(e->sumsq);
    free(e->plan);
    free(e);
}
