// head.c: final RMSNorm + LM head + cross-entropy, in chunks of rows so the
// full (N, V) logits need not exist; each chunk's logits buffer is turned into
// d(logits) in place and consumed by the head's backward right away. The chunk
// is sized from the device memory left (mt_head_size_chunk).
#include "engine/engine_internal.h"

#include <string.h>

int mt_head_chunk_rows(int N, int V, size_t act_size, size_t budget_bytes, int floor_rows) {
    size_t row = (size_t)V * act_size, rows = row ? budget_bytes / row : 0;
    if (rows < (size_t)floor_rows) rows = (size_t)floor_rows;
    return (int)(rows > (size_t)N ? (size_t)N : rows < 1 ? 1 : rows);
}

// The chunk the memory plan counted (<= 256 MiB of logits) is the floor. On a device
// (cuda, and the sim, which prices what cuda would run) the chunk grows into the memory
// left once everything else is allocated: each chunk's weight-gradient GEMM re-reads and
// re-writes the whole V x C gradient (174 passes of 1 GB per step for Qwen2.5-7B at
// batch 150 with the floor alone), and each chunk rounds a bf16 gradient once more. The
// reserve covers what backends allocate lazily after this point: attention workspaces
// (cuDNN's f32 dQ accumulator and row sums, the native kernels' row sums), the GEMM and
// embedding-sort scratch, lazily loaded kernels. The cpu backend keeps the floor: its
// results must not depend on how much RAM happens to be free.
mt_status mt_head_size_chunk(mt_engine *e) {
    if (!strcmp(e->be->ops->name, "cpu")) return MT_OK;
    mt_device_info info;
    MT_TRY(e->be->ops->device_info(e->be, &info));
    const mt_dims *d = &e->d;
    size_t reserve = ((size_t)1 << 30) + (size_t)d->B * d->T * d->NH * (d->HD + 2) * 4 + (size_t)d->N * 16;
    size_t budget = info.mem_free_bytes > reserve ? info.mem_free_bytes - reserve : 0;
    e->chunk_rows = mt_head_chunk_rows(d->N, e->m->cfg.vocab_size, e->act_size, budget, e->chunk_rows);
    return MT_OK;
}

mt_status mt_head_forward_backward(mt_engine *e, int mb, int want_grads, float dscale) {
    mt_backend *be = e->be;
    const mt_backend_ops *o = be->ops;
    const mt_model *m = e->m;
    const int N = e->d.N, C = e->d.C, V = m->cfg.vocab_size;
    const size_t ws = mt_dtype_size(m->wdt), as = e->act_size;
    const mt_view *vn = &m->lay_head.t[MT_T_NORM];
    const mt_view *vw = m->cfg.tie_word_embeddings ? &m->lay_embed.t[MT_T_EMBED] : &m->lay_head.t[MT_T_LM_HEAD];
    char *wbase = m->cfg.tie_word_embeddings ? e->embed_w : e->head_w;
    char *gbase = m->cfg.tie_word_embeddings ? e->embed_g : e->head_g;
    const void *norm_w = (char *)e->head_w + vn->offset * ws, *W = wbase + vw->offset * ws;
    void *dnorm = (char *)e->head_g + vn->offset * ws, *dW = gbase + vw->offset * ws;
    (void)mb;

    // More than one chunk and an f32 sum buffer: the head's gradient is summed there and
    // rounded into dW once (else each chunk's "+=" rounds the bf16 gradient again).
    const int f32_sum = e->grad_sum && e->chunk_rows < N && m->wdt != MT_F32;
    void *dW_sum = f32_sum ? (void *)e->grad_sum : dW;
    MT_TRY(o->rmsnorm_fwd(be, e->xn, e->rstd_final, e->x_final, norm_w, m->wdt, N, C, e->d.eps));
    for (int r0 = 0; r0 < N; r0 += e->chunk_rows) {
        int n = N - r0 < e->chunk_rows ? N - r0 : e->chunk_rows;
        const char *xn = (const char *)e->xn + (size_t)r0 * C * as;
        MT_TRY(o->matmul_fwd(be, e->logits, xn, W, NULL, m->wdt, n, C, V));
        MT_TRY(o->xent_fwd_bwd(be, e->logits, e->losses + r0, e->d_tgt + r0, n, V, dscale));
        if (want_grads)
            MT_TRY(o->matmul_bwd(be, (char *)e->dxn + (size_t)r0 * C * as, dW_sum, NULL, e->logits, xn, W, m->wdt, n, C,
                                 V, (r0 > 0 ? MT_ACC_DW : 0) | (f32_sum ? MT_DW_F32 : 0)));
    }
    if (!want_grads) return MT_OK;
    if (f32_sum) MT_TRY(o->cast(be, dW, m->wdt, dW_sum, MT_F32, (size_t)V * C));
    return o->rmsnorm_bwd(be, e->dx, dnorm, e->dxn, e->x_final, norm_w, e->rstd_final, m->wdt, N, C);
}
