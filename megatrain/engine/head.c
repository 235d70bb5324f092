// head.c: final RMSNorm + LM head + cross-entropy, in chunks of rows so the
// full (N, V) logits never exist; each chunk's logits buffer is turned into
// d(logits) in place and consumed by the head's backward right away.
#include "engine/engine_internal.h"

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

    MT_TRY(o->rmsnorm_fwd(be, e->xn, e->rstd_final, e->x_final, norm_w, m->wdt, N, C, e->d.eps));
    for (int r0 = 0; r0 < N; r0 += e->chunk_rows) {
        int n = N - r0 < e->chunk_rows ? N - r0 : e->chunk_rows;
        const char *xn = (const char *)e->xn + (size_t)r0 * C * as;
        MT_TRY(o->matmul_fwd(be, e->logits, xn, W, NULL, m->wdt, n, C, V));
        MT_TRY(o->xent_fwd_bwd(be, e->logits, e->losses + r0, e->d_tgt + r0, n, V, dscale));
        if (want_grads)
            MT_TRY(o->matmul_bwd(be, (char *)e->dxn + (size_t)r0 * C * as, dW, NULL, e->logits, xn, W, m->wdt, n, C, V,
                                 r0 > 0 ? MT_ACC_DW : 0));
    }
    if (!want_grads) return MT_OK;
    return o->rmsnorm_bwd(be, e->dx, dnorm, e->dxn, e->x_final, norm_w, e->rstd_final, m->wdt, N, C);
}
