// footprint.c: the plan inputs of a run (mt_engine_shape) and the memory plan as
// the sum of the parts' bytes (the tally they allocate through is parts.c).

#include "engine/activations.h"
#include "engine/ckpt_store.h"
#include "engine/embed_rows.h"
#include "engine/grad_offload.h"
#include "engine/optimizer_worker.h"
#include "engine/weight_ring.h"

// Loss-head rows per chunk: at most 256 MiB of logits at a time. Fewer chunks
// also means fewer roundings of the head's bf16 gradient, which accumulates
// across chunks (in paper/mixed precision the gradient itself is bf16).
static int loss_chunk_rows(const mt_config *c, int N, size_t act_size) {
    size_t rows = (256u << 20) / ((size_t)c->vocab_size * act_size);
    return (int)(rows < 1 ? 1 : rows > (size_t)N ? (size_t)N : rows);
}

mt_part_bytes mt_host_state_bytes(const mt_engine_shape *sh) {
    return (mt_part_bytes){.host = mt_model_host_bytes(&sh->c, sh->prec),
                           .pinned = sh->s.host_pinned ? mt_model_pinned_bytes(&sh->c, sh->prec) : 0};
}

static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }

// A bf16 weight gradient (OC x IC) formed in f32 a block of rows at a time: the floats of one
// block (MT_CPU_DW_BLOCK_FLOATS, backends/cpu/cpu_internal.h: 16 Mi, or one row where longer).
static size_t dw_block(size_t OC, size_t IC) {
    size_t rows = ((size_t)16 << 20) / IC;
    rows = rows < 1 ? 1 : rows > OC ? OC : rows;
    return rows * IC;
}

// The slots of backends/cpu/cpu_internal.h, each grown to its largest use and kept for the run:
//   W: bf16 weights widened to f32 for sgemm (cpu_matmul.c), the largest matrix (the head's V x C);
//   DW: a bf16 weight gradient's block of rows formed in f32 and rounded once, the largest of
//     those not summed in the f32 buffer (grad_sum_elems: the head or MLP when chunked);
//   RED, ROWS: norms' per-block partial sums, attention's row sums (cpu_norm.c, cpu_attention.c);
//   IDX: the embedding's sort keys (cpu_elementwise.c). TILE (per thread, a few KiB) is left out.
mt_part_bytes mt_kernel_scratch_bytes(const mt_engine_shape *sh) {
    if (!sh->f32_kernels) return (mt_part_bytes){0};
    const mt_dims *d = &sh->d;
    size_t C = (size_t)d->C, F = (size_t)d->F, V = (size_t)sh->c.vocab_size, N = (size_t)d->N;
    size_t qkv = (size_t)d->QKV * d->HD * C, o = C * (size_t)d->NH * d->HD, gu = 2 * F * C, down = C * F;
    size_t w = 0, dw = 0;
    if (sh->wdt == MT_BF16) {
        w = max_z(max_z(qkv, o), max_z(max_z(gu, down), V * C)) * 4;
        int mlp_f32 = sh->grad_sum_elems && d->mlp_rows > 0 && d->mlp_rows < d->N;
        int head_f32 = sh->grad_sum_elems && sh->chunk_rows < d->N;
        size_t att = max_z(dw_block((size_t)d->QKV * d->HD, C), dw_block(C, (size_t)d->NH * d->HD));
        size_t mlp = mlp_f32 ? 0 : max_z(dw_block(2 * F, C), dw_block(C, F)), head = head_f32 ? 0 : dw_block(V, C);
        dw = max_z(att, max_z(mlp, head)) * 4;
    }
    size_t nb = (N + 15) / 16 < 64 ? (N + 15) / 16 : 64; // MT_CPU_MAX_BLOCKS blocks of >= 16 rows, at most
    size_t red = nb * max_z(C, 2 * (size_t)d->HD) * 8;
    size_t rows = max_z((size_t)d->B * d->NH * d->T, nb * C) * 4;
    size_t idx = N * 8 + (N + 1) * 4;
    return (mt_part_bytes){.device = w + dw + red + rows + idx};
}

static mt_engine_footprint sum_parts(const mt_engine_shape *sh) {
    mt_engine_footprint f = {0};
    f.state = mt_host_state_bytes(sh);
    f.weights = mt_weight_ring_bytes(sh);
    f.grads = mt_grad_offload_bytes(sh);
    f.checkpoints = mt_ckpt_store_bytes(sh);
    f.activations = mt_activations_bytes(sh);
    f.optimizer = mt_opt_worker_bytes(sh);
    f.scratch = mt_kernel_scratch_bytes(sh);
    const mt_part_bytes *parts[] = {&f.state,       &f.weights,   &f.grads,  &f.checkpoints,
                                    &f.activations, &f.optimizer, &f.scratch};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        f.device_bytes += parts[i]->device;
        f.host_bytes += parts[i]->host;
        f.pinned_bytes += parts[i]->pinned;
    }
    f.offload_checkpoints = sh->s.offload_checkpoints;
    f.spec_window = sh->spec_window;
    f.grad_sum_f32 = sh->grad_sum_f32;
    f.recompute = sh->s.recompute;
    f.rows_cap = sh->rows_cap;
    f.rows_bytes = mt_opt_worker_rows_bytes(sh) + mt_embed_rows_bytes(sh).host;
    f.grad_sum_bytes = sh->grad_sum_elems ? mt_dev_round(sh->grad_sum_elems * 4) : 0;
    return f;
}

// Elements of the f32 buffer a chunked weight gradient is summed in: the larger of the
// MLP's (gate, up and down: 3 F C) and the LM head's (V C), each only when it runs in
// more than one chunk (the head at its floor chunk). 0 where weight gradients are f32 already.
static size_t grad_sum_elems(const mt_engine_shape *sh) {
    if (sh->wdt == MT_F32) return 0;
    long long N = sh->d.N, C = sh->d.C;
    size_t mlp = sh->d.mlp_rows > 0 && sh->d.mlp_rows < N ? (size_t)3 * sh->d.F * C : 0;
    size_t head = sh->chunk_rows < N ? (size_t)sh->c.vocab_size * C : 0;
    return mlp > head ? mlp : head;
}

// Offload only when there are more checkpoints than device slots; auto (-1): only
// when the plan with every checkpoint on the device does not fit.
static void resolve_offload(mt_engine_shape *sh, int asked, size_t device_free) {
    int offload = asked > 0;
    if (asked < 0 && device_free) {
        sh->s.offload_checkpoints = 0;
        offload = sum_parts(sh).device_bytes > device_free;
    }
    sh->s.offload_checkpoints = offload && sh->n_ckpt > MT_CKPT_SLOTS;
}

// The loss head's chunk on a device grows from its floor into the memory left: every chunk re-reads and
// re-writes the whole V x C weight gradient (and rounds a bf16 one once more). The reserve covers what
// backends allocate lazily later (attention and GEMM workspaces, kernels). A cpu backend keeps the floor:
// its results must not depend on how much RAM happens to be free.
static int grown_chunk_rows(const mt_engine_shape *sh, size_t device_free) {
    const mt_dims *d = &sh->d;
    size_t before = mt_weight_ring_bytes(sh).device + mt_grad_offload_bytes(sh).device +
                    mt_ckpt_store_bytes(sh).device + mt_activations_layer_bytes(sh);
    size_t left = device_free > before ? device_free - before : 0;
    size_t reserve = ((size_t)1 << 30) + (size_t)d->B * d->T * d->NH * (d->HD + 2) * 4 + (size_t)d->N * 16;
    size_t budget = left > reserve ? left - reserve : 0;
    return mt_head_chunk_rows(d->N, sh->c.vocab_size, sh->act_elem_bytes, budget, sh->chunk_rows);
}

// The speculative step's window: units from the last layer down (the order their
// gradients become final; never the head: optimizer_worker.h) while their spare
// blocks fit in what the rest of the plan leaves of host_free (0 = unknown: every
// unit). None fits: speculation off.
static void spec_window(mt_engine_shape *sh, size_t host_free) {
    sh->spec_window = 0;
    size_t used = sum_parts(sh).host_bytes, room = host_free > used ? host_free - used : 0;
    int n = sh->L + 2;
    for (int k = 0; k < n - 1; k++) {
        int u = n - 2 - k;
        const mt_unit_layout *lay = u == 0 ? &sh->lay_embed : &sh->lay_layer;
        size_t b = mt_opt_spare_bytes(lay, sh->prec);
        if (host_free && b > room) break;
        room -= host_free ? b : 0;
        sh->spec_window++;
    }
    if (!sh->spec_window) sh->s.speculative = 0;
}

// What follows from the activation fields: how many checkpoints and internals sets
// exist, where the checkpoints live (offload auto) and how chunked gradients are summed.
static void resolve_memory(mt_engine_shape *sh, const mt_engine_opts *o, size_t device_free) {
    int K = sh->s.ckpt_interval;
    sh->n_ckpt = sh->s.keep_activations ? sh->L : (sh->L + K - 1) / K;
    sh->n_acts = sh->s.keep_activations ? sh->L : 1;
    sh->d.keep_mlp = sh->s.keep_activations ? sh->s.keep_mlp : 0;
    sh->d.recompute_norms = sh->s.keep_activations && sh->s.recompute_norms;
    int asked = sh->s.offload_checkpoints;
    int f32_sum = o->grad_sum != MT_GRAD_SUM_BF16;
    sh->grad_sum_f32 = f32_sum || sh->wdt == MT_F32;
    sh->grad_sum_elems = f32_sum ? grad_sum_elems(sh) : 0;
    resolve_offload(sh, asked, device_free);
    // AUTO gives the f32 buffer up (back to the official code's bf16 sum) rather than not fit.
    if (o->grad_sum == MT_GRAD_SUM_AUTO && sh->grad_sum_elems && device_free &&
        sum_parts(sh).device_bytes > device_free) {
        sh->grad_sum_f32 = sh->wdt == MT_F32;
        sh->grad_sum_elems = 0;
        resolve_offload(sh, asked, device_free);
    }
}

void mt_engine_shape_init(mt_engine_shape *sh, const mt_config *c, mt_precision p, mt_dtype act,
                          const mt_engine_opts *o, size_t device_free, unsigned caps) {
    mt_engine_shape z = {0};
    *sh = z;
    sh->c = *c;
    sh->prec = p;
    sh->wdt = mt_precision_wdt(p);
    sh->act = act;
    sh->wdt_elem_bytes = mt_dtype_size(sh->wdt);
    sh->act_elem_bytes = mt_dtype_size(act);
    sh->L = c->num_layers;
    sh->G = o->grad_accum;
    sh->grad_slabs = o->grad_slabs;
    sh->keep_trace = o->keep_trace;
    sh->f32_kernels = (caps & MT_CAP_TENSOR_DATA) && !(caps & MT_CAP_BF16);
    sh->d = (mt_dims){.B = o->B, .T = o->T, .N = o->B * o->T, .C = c->hidden_size, .F = c->intermediate_size,
                      .NH = c->num_heads, .NKV = c->num_kv_heads, .HD = c->head_dim,
                      .QKV = c->num_heads + 2 * c->num_kv_heads, .eps = c->rms_norm_eps, .qk_norm = c->qk_norm,
                      .bias = c->attention_bias, .mlp_rows = o->mlp_rows, .wdt = sh->wdt};
    mt_layout_build(c, &sh->lay_embed, &sh->lay_layer, &sh->lay_head);
    mt_schedule_resolve(o->schedule, &o->sched, c, &sh->s);
    sh->wire = mt_schedule_grad_wire(&sh->s, sh->wdt);
    sh->chunk_rows = loss_chunk_rows(c, sh->d.N, sh->act_elem_bytes);
    sh->x_bytes = mt_dev_round((size_t)sh->d.N * sh->d.C * sh->act_elem_bytes);
    sh->slab_elems = sh->lay_layer.numel > sh->lay_embed.numel ? sh->lay_layer.numel : sh->lay_embed.numel;
    if (sh->lay_head.numel > sh->slab_elems) sh->slab_elems = sh->lay_head.numel;
    if (sh->s.recompute == MT_RECOMPUTE_AUTO) { // the least recompute whose device plan fits (unknown: full)
        mt_schedule_desc asked = sh->s;
        // Checkpoints asked to live in host memory: only full checkpoints anything.
        for (int r = asked.offload_checkpoints == 1 ? MT_RECOMPUTE_FULL : MT_RECOMPUTE_NONE; r >= MT_RECOMPUTE_FULL;
             r--) {
            sh->s = asked;
            mt_schedule_set_recompute(&sh->s, (mt_recompute)r);
            resolve_memory(sh, o, device_free);
            if (r == MT_RECOMPUTE_FULL || (device_free && sum_parts(sh).device_bytes <= device_free)) break;
        }
    } else {
        resolve_memory(sh, o, device_free);
    }
    if ((caps & MT_CAP_DEVICE_MEMORY) && device_free) sh->chunk_rows = grown_chunk_rows(sh, device_free);
    // Rows first: at most the step's tokens, and at most half the vocabulary (past that the
    // rows are most of the table: it crosses whole). A tied embedding is the head too: whole.
    if (sh->s.rows_first && !c->tie_word_embeddings) {
        size_t toks = (size_t)sh->G * sh->d.N, half = (size_t)c->vocab_size / 2;
        sh->rows_cap = toks < half ? toks : half;
    }
    if (sh->s.speculative) spec_window(sh, o->host_free); // last: its spares take what the rest leaves
}

mt_engine_footprint mt_engine_footprint_of(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_dtype act,
                                           size_t device_free, unsigned backend_caps) {
    mt_engine_shape sh;
    mt_engine_shape_init(&sh, c, p, act, o, device_free, backend_caps);
    return sum_parts(&sh);
}
