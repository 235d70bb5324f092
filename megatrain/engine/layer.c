// layer.c: one Llama/Qwen decoder layer, forward and backward, as a sequence
// of backend kernels over a bound weight view:
//   ln1 = rms(x) ; qkv = rope(qknorm(ln1 @ Wqkv + b)) ; att = attn(qkv)
//   x_mid = x + att @ Wo ; ln2 = rms(x_mid) ; h = silu(ln2 @ Wg) * (ln2 @ Wu)
//   x_out = x_mid + h @ Wd
// The MLP runs in chunks of d->mlp_rows tokens: its (tokens, 3F) internals are
// the largest of the layer, so only one chunk of them ever exists; backward
// recomputes gate/up per chunk (the recompute pass stops at ln2, so the total
// FLOPs do not change), unless the schedule keeps them for every token (keep_mlp:
// the gate/up output, and SwiGLU's product).
#include "engine/layer.h"

#include <stdint.h>

static void *at(void *base, const mt_tensor_slot *v, size_t wsize) {
    return v->present ? (char *)base + v->offset * wsize : NULL;
}

void mt_layer_bind(const mt_unit_layout *lay, void *base, mt_dtype wdt, mt_layer_ptrs *o) {
    size_t ws = mt_dtype_size(wdt);
    o->ln1 = at(base, &lay->t[MT_T_LN1], ws);
    o->qkv_w = at(base, &lay->t[MT_T_Q], ws);
    o->qkv_b = at(base, &lay->t[MT_T_QB], ws);
    o->q_norm = at(base, &lay->t[MT_T_QNORM], ws);
    o->k_norm = at(base, &lay->t[MT_T_KNORM], ws);
    o->o_w = at(base, &lay->t[MT_T_O], ws);
    o->ln2 = at(base, &lay->t[MT_T_LN2], ws);
    o->gu_w = at(base, &lay->t[MT_T_GATE], ws);
    o->down_w = at(base, &lay->t[MT_T_DOWN], ws);
}

// Sizes (elements) of the activation tensors; one table drives bytes and carving.
typedef struct {
    size_t act[9];  // ln1, qkv_pre, qkv_n, qkv, att, x_mid, ln2, gu, h
    size_t f32[4];  // rstd1, rstd_qk, lse, rstd2
} acts_sizes;

static acts_sizes sizes_of(const mt_dims *d) {
    size_t N = (size_t)d->N, qkv = N * (size_t)d->QKV * d->HD;
    // qkv_pre and qkv_n are kept only for the q/k-norm backward; without q/k norm the
    // projection writes straight into qkv and RoPE rotates it in place.
    size_t F = (size_t)d->F;
    size_t ln = d->recompute_norms ? 0 : N * d->C;
    acts_sizes s = {{ln, d->qk_norm ? qkv : 0, d->qk_norm ? qkv : 0, qkv, N * (size_t)d->NH * d->HD, N * d->C, ln,
                     d->keep_mlp >= 1 ? N * 2 * F : 0, d->keep_mlp >= 2 ? N * F : 0},
                    {N, d->qk_norm ? N * (size_t)(d->NH + d->NKV) : 0, (size_t)d->B * d->NH * d->T, N}};
    return s;
}

int mt_layer_mlp_rows(const mt_dims *d) { return d->mlp_rows > 0 && d->mlp_rows < d->N ? d->mlp_rows : d->N; }

static size_t al(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t mt_layer_acts_bytes(const mt_dims *d, mt_dtype act) {
    acts_sizes s = sizes_of(d);
    size_t b = 0;
    for (int i = 0; i < 9; i++) b += s.act[i] ? al(s.act[i] * mt_dtype_size(act)) : 0;
    for (int i = 0; i < 4; i++) b += al(s.f32[i] * 4);
    return b;
}

void mt_layer_acts_carve(const mt_dims *d, mt_dtype act, void *mem, mt_layer_acts *a) {
    acts_sizes s = sizes_of(d);
    char *p = mem;
    void **act_ptrs[9] = {&a->ln1, &a->qkv_pre, &a->qkv_n, &a->qkv, &a->att, &a->x_mid, &a->ln2, &a->gu, &a->h};
    for (int i = 0; i < 9; i++) {
        *act_ptrs[i] = s.act[i] ? p : NULL;
        p += s.act[i] ? al(s.act[i] * mt_dtype_size(act)) : 0;
    }
    float **f_ptrs[4] = {&a->rstd1, &a->rstd_qk, &a->lse, &a->rstd2};
    for (int i = 0; i < 4; i++) {
        *f_ptrs[i] = s.f32[i] ? (float *)p : NULL;
        p += al(s.f32[i] * 4);
    }
}

size_t mt_layer_scratch_bytes(const mt_dims *d, mt_dtype act) {
    size_t N = (size_t)d->N, R = (size_t)mt_layer_mlp_rows(d), e = mt_dtype_size(act);
    return al(N * d->C * e) * 2 + al(N * (size_t)d->QKV * d->HD * e) * (d->qk_norm ? 2 : 1) +
           al(N * (size_t)d->NH * d->HD * e) + 2 * (al(R * 2 * (size_t)d->F * e) + al(R * (size_t)d->F * e));
}

void mt_layer_scratch_carve(const mt_dims *d, mt_dtype act, void *mem, mt_layer_scratch *s) {
    size_t N = (size_t)d->N, e = mt_dtype_size(act);
    char *p = mem;
    s->dtmp = p, p += al(N * d->C * e);
    s->dln = p, p += al(N * d->C * e);
    s->dqkv = p, p += al(N * (size_t)d->QKV * d->HD * e);
    s->dqkv_pre = NULL;
    if (d->qk_norm) s->dqkv_pre = p, p += al(N * (size_t)d->QKV * d->HD * e);
    s->datt = p, p += al(N * (size_t)d->NH * d->HD * e);
    size_t R = (size_t)mt_layer_mlp_rows(d);
    s->gu = p, p += al(R * 2 * (size_t)d->F * e);
    s->h = p, p += al(R * (size_t)d->F * e);
    s->dgu = p, p += al(R * 2 * (size_t)d->F * e);
    s->dh = p;
}

// The MLP's gate/up output and SwiGLU product for the chunk at row r0: the kept
// per-token tensor's rows (keep_mlp), else the scratch that holds one chunk.
static void *mlp_gu(const mt_dims *d, const mt_layer_acts *a, const mt_layer_scratch *s, int r0, size_t as) {
    return a->gu ? (char *)a->gu + (size_t)r0 * 2 * d->F * as : s->gu;
}
static void *mlp_h(const mt_dims *d, const mt_layer_acts *a, const mt_layer_scratch *s, int r0, size_t as) {
    return a->h ? (char *)a->h + (size_t)r0 * d->F * as : s->h;
}

mt_status mt_layer_forward(mt_backend *be, const mt_dims *d, const mt_layer_ptrs *w, mt_layer_acts *a,
                           mt_layer_scratch *s, const void *x_in, void *x_out) {
    const int N = d->N, C = d->C, QD = d->QKV * d->HD;
    void *ln1 = a->ln1 ? a->ln1 : s->dtmp, *ln2 = a->ln2 ? a->ln2 : s->dln; // not saved: scratch (recompute_norms)
    MT_TRY(mt_backend_rmsnorm_fwd(be, ln1, a->rstd1, x_in, w->ln1, d->wdt, N, C, d->eps));
    const void *pre_rope = a->qkv; // no q/k norm: project into qkv, rotate in place
    if (d->qk_norm) {
        MT_TRY(mt_backend_matmul_fwd(be, a->qkv_pre, ln1, w->qkv_w, w->qkv_b, d->wdt, N, C, QD));
        MT_TRY(mt_backend_qk_norm_fwd(be, a->qkv_n, a->rstd_qk, a->qkv_pre, w->q_norm, w->k_norm, d->wdt, N, d->NH,
                                      d->NKV, d->HD, d->eps));
        pre_rope = a->qkv_n;
    } else {
        MT_TRY(mt_backend_matmul_fwd(be, a->qkv, ln1, w->qkv_w, w->qkv_b, d->wdt, N, C, QD));
    }
    MT_TRY(mt_backend_rope_fwd(be, a->qkv, pre_rope, d->rope_cos, d->rope_sin, d->B, d->T, d->NH, d->NKV, d->HD));
    MT_TRY(mt_backend_attention_fwd(be, a->att, a->lse, a->qkv, d->B, d->T, d->NH, d->NKV, d->HD));
    MT_TRY(mt_backend_matmul_fwd(be, a->x_mid, a->att, w->o_w, NULL, d->wdt, N, d->NH * d->HD, C));
    // x_mid += x_in and ln2 = rms(x_mid) in one pass
    MT_TRY(mt_backend_add_rmsnorm_fwd(be, a->x_mid, ln2, a->rstd2, a->x_mid, x_in, w->ln2, d->wdt, N, C, d->eps));
    if (!x_out) return MT_OK; // recompute for backward: the MLP is recomputed chunk by chunk there
    const size_t as = mt_dtype_size(be->act_dtype);
    for (int r0 = 0, R = mt_layer_mlp_rows(d); r0 < N; r0 += R) {
        int n = N - r0 < R ? N - r0 : R;
        size_t row = (size_t)r0 * C * as;
        void *gu = mlp_gu(d, a, s, r0, as), *h = mlp_h(d, a, s, r0, as); // kept for backward, or one chunk's
        MT_TRY(mt_backend_matmul_fwd(be, gu, (const char *)ln2 + row, w->gu_w, NULL, d->wdt, n, C, 2 * d->F));
        MT_TRY(mt_backend_swiglu_fwd(be, h, gu, n, d->F));
        MT_TRY(mt_backend_matmul_fwd(be, (char *)x_out + row, h, w->down_w, NULL, d->wdt, n, d->F, C));
    }
    return mt_backend_add(be, x_out, x_out, a->x_mid, (size_t)N * C);
}

mt_status mt_layer_backward(mt_backend *be, const mt_dims *d, const mt_layer_ptrs *w, const mt_layer_ptrs *g,
                            const mt_layer_acts *a, mt_layer_scratch *s, const void *x_in, void *dx) {
    const int N = d->N, C = d->C, QD = d->QKV * d->HD, AD = d->NH * d->HD;
    // MLP branch, chunk by chunk: dx is dL/dx_out = dL/d(mlp out) and (residual) part of dL/dx_mid.
    // With more than one chunk and an f32 sum buffer, the gate/up and down gradients are
    // summed there (gate/up first, down after) and rounded into g once.
    const size_t as = mt_dtype_size(be->act_dtype);
    const int R = mt_layer_mlp_rows(d), f32_sum = s->grad_sum && R < N && d->wdt != MT_F32;
    const size_t n_gu = (size_t)2 * d->F * C, n_down = (size_t)C * d->F;
    void *dgu_w = f32_sum ? (void *)s->grad_sum : g->gu_w,
         *ddown_w = f32_sum ? (void *)(s->grad_sum + n_gu) : g->down_w;
    // Norm outputs not saved are recomputed into dtmp just before their readers, from the
    // saved input and x_mid (rstd rewritten with the same values): ln2 for the MLP here, ln1 below.
    const void *ln2_all = a->ln2, *ln1 = a->ln1;
    if (!ln2_all) {
        MT_TRY(mt_backend_rmsnorm_fwd(be, s->dtmp, a->rstd2, a->x_mid, w->ln2, d->wdt, N, C, d->eps));
        ln2_all = s->dtmp;
    }
    for (int r0 = 0; r0 < N; r0 += R) {
        int n = N - r0 < R ? N - r0 : R, acc = (r0 > 0 ? MT_ACC_DW : 0) | (f32_sum ? MT_DW_F32 : 0);
        size_t row = (size_t)r0 * C * as;
        const void *ln2 = (const char *)ln2_all + row;
        void *gu = mlp_gu(d, a, s, r0, as), *h = mlp_h(d, a, s, r0, as);
        if (!a->gu) MT_TRY(mt_backend_matmul_fwd(be, gu, ln2, w->gu_w, NULL, d->wdt, n, C, 2 * d->F)); // recompute
        if (!a->h) MT_TRY(mt_backend_swiglu_fwd(be, h, gu, n, d->F));
        MT_TRY(mt_backend_matmul_bwd(be, s->dh, ddown_w, NULL, (const char *)dx + row, h, w->down_w, d->wdt, n, d->F, C,
                             acc));
        MT_TRY(mt_backend_swiglu_bwd(be, s->dgu, s->dh, gu, n, d->F));
        MT_TRY(mt_backend_matmul_bwd(be, (char *)s->dln + row, dgu_w, NULL, s->dgu, ln2, w->gu_w, d->wdt, n, C,
                                     2 * d->F, acc));
    }
    if (f32_sum) { // the one rounding of each
        MT_TRY(mt_backend_cast(be, g->gu_w, d->wdt, dgu_w, MT_F32, n_gu));
        MT_TRY(mt_backend_cast(be, g->down_w, d->wdt, ddown_w, MT_F32, n_down));
    }
    // dx = dL/dx_mid: the residual's gradient plus the ln2 branch's, added in the norm's pass
    MT_TRY(mt_backend_rmsnorm_bwd_add(be, dx, g->ln2, s->dln, a->x_mid, w->ln2, a->rstd2, d->wdt, N, C));
    // Attention branch.
    MT_TRY(mt_backend_matmul_bwd(be, s->datt, g->o_w, NULL, dx, a->att, w->o_w, d->wdt, N, AD, C, 0));
    MT_TRY(mt_backend_attention_bwd(be, s->dqkv, s->datt, a->qkv, a->att, a->lse, d->B, d->T, d->NH, d->NKV, d->HD));
    MT_TRY(mt_backend_rope_bwd(be, s->dqkv, s->dqkv, d->rope_cos, d->rope_sin, d->B, d->T, d->NH, d->NKV, d->HD));
    const void *dqkv_pre = s->dqkv;
    if (d->qk_norm) {
        MT_TRY(mt_backend_qk_norm_bwd(be, s->dqkv_pre, g->q_norm, g->k_norm, s->dqkv, a->qkv_pre, w->q_norm, w->k_norm,
                              a->rstd_qk, d->wdt, N, d->NH, d->NKV, d->HD));
        dqkv_pre = s->dqkv_pre;
    }
    if (!ln1) {
        MT_TRY(mt_backend_rmsnorm_fwd(be, s->dtmp, a->rstd1, x_in, w->ln1, d->wdt, N, C, d->eps));
        ln1 = s->dtmp;
    }
    MT_TRY(mt_backend_matmul_bwd(be, s->dln, g->qkv_w, g->qkv_b, dqkv_pre, ln1, w->qkv_w, d->wdt, N, C, QD, 0));
    return mt_backend_rmsnorm_bwd_add(be, dx, g->ln1, s->dln, x_in, w->ln1, a->rstd1, d->wdt, N, C); // dx = dL/dx_in
}
