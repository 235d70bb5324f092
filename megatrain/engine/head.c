// head.c: final RMSNorm + LM head + cross-entropy, in chunks of rows so the
// full (N, V) logits need not exist; each chunk's logits buffer is turned into
// d(logits) in place and consumed by the head's backward right away. The chunk
// is sized with the plan (mt_engine_shape_init): a floor, grown into the device
// memory the other parts leave where the backend's memory is a device's.
#include "engine/engine_internal.h"

int mt_head_chunk_rows(int N, int V, size_t act_size, size_t budget_bytes, int floor_rows) {
    size_t row = (size_t)V * act_size, rows = row ? budget_bytes / row : 0;
    if (rows < (size_t)floor_rows) rows = (size_t)floor_rows;
    return (int)(rows > (size_t)N ? (size_t)N : rows < 1 ? 1 : rows);
}

mt_status mt_head_forward_backward(mt_engine *e, int mb, int want_grads, float dscale) {
    mt_backend *be = e->be;
    const mt_model *m = e->model;
    mt_activations *a = e->acts;
    const int N = e->dims.N, C = e->dims.C, V = m->cfg.vocab_size;
    const size_t ws = mt_dtype_size(m->wdt), as = e->sh.act_elem_bytes;
    const int tied = m->cfg.tie_word_embeddings;
    char *embed_w = mt_weight_ring_embed(e->ring), *head_w = mt_weight_ring_head(e->ring);
    char *embed_g = mt_grad_offload_embed(e->grads), *head_g = mt_grad_offload_head(e->grads);
    const mt_tensor_slot *vn = &m->lay_head.t[MT_T_NORM];
    const mt_tensor_slot *vw = tied ? &m->lay_embed.t[MT_T_EMBED] : &m->lay_head.t[MT_T_LM_HEAD];
    char *wbase = tied ? embed_w : head_w, *gbase = tied ? embed_g : head_g;
    const void *norm_w = head_w + vn->offset * ws, *W = wbase + vw->offset * ws;
    void *dnorm = head_g + vn->offset * ws, *dW = gbase + vw->offset * ws;
    (void)mb;

    // More than one chunk and an f32 sum buffer: the head's gradient is summed there and
    // rounded into dW once (else each chunk's "+=" rounds the bf16 gradient again).
    const int f32_sum = a->scratch.grad_sum && a->chunk_rows < N && m->wdt != MT_F32;
    void *dW_sum = f32_sum ? (void *)a->scratch.grad_sum : dW;
    MT_TRY(mt_backend_rmsnorm_fwd(be, a->xn, a->rstd_final, a->x_final, norm_w, m->wdt, N, C, e->dims.eps));
    for (int r0 = 0; r0 < N; r0 += a->chunk_rows) {
        int n = N - r0 < a->chunk_rows ? N - r0 : a->chunk_rows;
        const char *xn = (const char *)a->xn + (size_t)r0 * C * as;
        MT_TRY(mt_backend_matmul_fwd(be, a->logits, xn, W, NULL, m->wdt, n, C, V));
        MT_TRY(mt_backend_xent_fwd_bwd(be, a->logits, a->losses + r0, a->d_tgt + r0, n, V, dscale));
        if (want_grads)
            MT_TRY(mt_backend_matmul_bwd(be, (char *)a->dxn + (size_t)r0 * C * as, dW_sum, NULL, a->logits, xn, W,
                                         m->wdt, n, C, V, (r0 > 0 ? MT_ACC_DW : 0) | (f32_sum ? MT_DW_F32 : 0)));
    }
    if (!want_grads) return MT_OK;
    if (f32_sum) MT_TRY(mt_backend_cast(be, dW, m->wdt, dW_sum, MT_F32, (size_t)V * C));
    return mt_backend_rmsnorm_bwd(be, a->dx, dnorm, a->dxn, a->x_final, norm_w, a->rstd_final, m->wdt, N, C);
}
