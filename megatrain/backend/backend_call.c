// backend_call.c: the mt_backend_<op> wrappers (backend_call.h).
#include "backend/backend_call.h"
#include "backend/backend_impl.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    size_t offset;
} ops[MT_OP_COUNT] = {
#define E(id, field) [id] = {#field, offsetof(mt_backend_ops, field)}
    E(MT_OP_DEV_ALLOC, dev_alloc),         E(MT_OP_HOST_ALLOC, host_alloc),
    E(MT_OP_EVENT_CREATE, event_create),   E(MT_OP_EVENT_RECORD, event_record),
    E(MT_OP_STREAM_WAIT, stream_wait),     E(MT_OP_EVENT_SYNC, event_sync),
    E(MT_OP_STREAM_SYNC, stream_sync),     E(MT_OP_EVENT_ELAPSED_MS, event_elapsed_ms),
    E(MT_OP_COPY, copy),                   E(MT_OP_MEMSET_ZERO, memset_zero),
    E(MT_OP_EMBEDDING_FWD, embedding_fwd), E(MT_OP_EMBEDDING_BWD, embedding_bwd),
    E(MT_OP_MATMUL_FWD, matmul_fwd),       E(MT_OP_MATMUL_BWD, matmul_bwd),
    E(MT_OP_RMSNORM_FWD, rmsnorm_fwd),     E(MT_OP_RMSNORM_BWD, rmsnorm_bwd),
    E(MT_OP_QK_NORM_FWD, qk_norm_fwd),     E(MT_OP_QK_NORM_BWD, qk_norm_bwd),
    E(MT_OP_ROPE_FWD, rope_fwd),           E(MT_OP_ROPE_BWD, rope_bwd),
    E(MT_OP_ATTENTION_FWD, attention_fwd), E(MT_OP_ATTENTION_BWD, attention_bwd),
    E(MT_OP_SWIGLU_FWD, swiglu_fwd),       E(MT_OP_SWIGLU_BWD, swiglu_bwd),
    E(MT_OP_ADD, add),                     E(MT_OP_XENT_FWD_BWD, xent_fwd_bwd),
    E(MT_OP_CAST, cast),                   E(MT_OP_ADD_RMSNORM_FWD, add_rmsnorm_fwd),
    E(MT_OP_RMSNORM_BWD_ADD, rmsnorm_bwd_add), E(MT_OP_HOST_WORK_MS, host_work_ms),
    E(MT_OP_TRACE_WRITE, trace_write),     E(MT_OP_SET_ATTENTION, set_attention),
    E(MT_OP_ADAMW, adamw),                 E(MT_OP_GRAD_SUMSQ, grad_sumsq),
    E(MT_OP_GRAD_ADD, grad_add),
#undef E
};

int mt_backend_supports(const mt_backend *be, mt_op op) {
    if (!be || (int)op < 0 || op >= MT_OP_COUNT) return 0;
    void *const *entry = (void *const *)((const char *)be->ops + ops[op].offset);
    return *entry != NULL;
}

int mt_backend_supports_shape(const mt_backend *be, mt_op op, const mt_op_shape *s) {
    return mt_backend_supports(be, op) && (!be->ops->supports || be->ops->supports(be, op, s));
}

const char *mt_op_name(mt_op op) { return (int)op >= 0 && op < MT_OP_COUNT ? ops[op].name : "?"; }

double mt_backend_copied_bytes(const mt_backend *be, mt_copy_kind kind) {
    return (double)__atomic_load_n(&be->copied_bytes[kind], __ATOMIC_RELAXED);
}

// A failed call's message, with the backend and the op in front.
static mt_status named(const mt_backend *be, mt_op op, mt_status s) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s", mt_last_error());
    return mt_fail(s, "%s %s: %s", be->ops->name, ops[op].name, msg);
}

static mt_status lacking(const mt_backend *be, mt_op op) {
    return mt_fail(MT_ERR_UNSUPPORTED, "the %s backend has no %s", be->ops->name, ops[op].name);
}

// CALL: the entry must exist; a failure names the op. PLAIN: its own message stands
// (an allocation says what ran out; a trace file names its path).
#define CALL(op, field, ...)                                        \
    do {                                                            \
        if (!be->ops->field) return lacking(be, op);                \
        mt_status s_ = be->ops->field(be, __VA_ARGS__);             \
        return s_ == MT_OK ? MT_OK : named(be, op, s_);             \
    } while (0)
#define PLAIN(op, field, ...)                                       \
    do {                                                            \
        if (!be->ops->field) return lacking(be, op);                \
        return be->ops->field(be, __VA_ARGS__);                     \
    } while (0)

mt_status mt_backend_device_info(mt_backend *be, mt_device_info *out) { return be->ops->device_info(be, out); }
mt_status mt_backend_dev_alloc(mt_backend *be, size_t bytes, void **out) {
    PLAIN(MT_OP_DEV_ALLOC, dev_alloc, bytes, out);
}
void mt_backend_dev_free(mt_backend *be, void *p) {
    if (p) be->ops->dev_free(be, p);
}
mt_status mt_backend_host_alloc(mt_backend *be, size_t bytes, void **out) {
    PLAIN(MT_OP_HOST_ALLOC, host_alloc, bytes, out);
}
void mt_backend_host_free(mt_backend *be, void *p, size_t bytes) {
    if (p) be->ops->host_free(be, p, bytes);
}
mt_status mt_backend_event_create(mt_backend *be, mt_event **out) { PLAIN(MT_OP_EVENT_CREATE, event_create, out); }
void mt_backend_event_destroy(mt_backend *be, mt_event *ev) {
    if (ev) be->ops->event_destroy(be, ev);
}
mt_status mt_backend_event_record(mt_backend *be, mt_event *ev, mt_stream_id s) {
    CALL(MT_OP_EVENT_RECORD, event_record, ev, s);
}
mt_status mt_backend_stream_wait(mt_backend *be, mt_stream_id s, mt_event *ev) {
    CALL(MT_OP_STREAM_WAIT, stream_wait, s, ev);
}
mt_status mt_backend_event_sync(mt_backend *be, mt_event *ev) { CALL(MT_OP_EVENT_SYNC, event_sync, ev); }
mt_status mt_backend_stream_sync(mt_backend *be, mt_stream_id s) { CALL(MT_OP_STREAM_SYNC, stream_sync, s); }
mt_status mt_backend_event_elapsed_ms(mt_backend *be, mt_event *start, mt_event *end, float *ms) {
    CALL(MT_OP_EVENT_ELAPSED_MS, event_elapsed_ms, start, end, ms);
}
mt_status mt_backend_copy(mt_backend *be, void *dst, const void *src, size_t bytes, mt_copy_kind kind, mt_stream_id s) {
    if ((int)kind >= 0 && kind <= MT_COPY_D2D) __atomic_fetch_add(&be->copied_bytes[kind], bytes, __ATOMIC_RELAXED);
    CALL(MT_OP_COPY, copy, dst, src, bytes, kind, s);
}
mt_status mt_backend_memset_zero(mt_backend *be, void *dst, size_t bytes, mt_stream_id s) {
    CALL(MT_OP_MEMSET_ZERO, memset_zero, dst, bytes, s);
}

mt_status mt_backend_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N,
                                   int C) {
    CALL(MT_OP_EMBEDDING_FWD, embedding_fwd, out, ids, wte, wdt, N, C);
}
mt_status mt_backend_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout,
                                   int N, int C) {
    CALL(MT_OP_EMBEDDING_BWD, embedding_bwd, dwte, wdt, ids, dout, N, C);
}
mt_status mt_backend_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias,
                                mt_dtype wdt, int N, int IC, int OC) {
    CALL(MT_OP_MATMUL_FWD, matmul_fwd, out, inp, w, bias, wdt, N, IC, OC);
}
mt_status mt_backend_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                                const void *w, mt_dtype wdt, int N, int IC, int OC, int flags) {
    CALL(MT_OP_MATMUL_BWD, matmul_bwd, dinp, dw, dbias, dout, inp, w, wdt, N, IC, OC, flags);
}
mt_status mt_backend_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt,
                                 int R, int D, float eps) {
    CALL(MT_OP_RMSNORM_FWD, rmsnorm_fwd, out, rstd, inp, w, wdt, R, D, eps);
}
mt_status mt_backend_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp,
                                 const void *w, const float *rstd, mt_dtype wdt, int R, int D) {
    CALL(MT_OP_RMSNORM_BWD, rmsnorm_bwd, dinp, dw, dout, inp, w, rstd, wdt, R, D);
}
mt_status mt_backend_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw,
                                 const void *kw, mt_dtype wdt, int N, int NH, int NKV, int HD, float eps) {
    CALL(MT_OP_QK_NORM_FWD, qk_norm_fwd, out, rstd, inp, qw, kw, wdt, N, NH, NKV, HD, eps);
}
mt_status mt_backend_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                                 const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH,
                                 int NKV, int HD) {
    CALL(MT_OP_QK_NORM_BWD, qk_norm_bwd, dinp, dqw, dkw, dout, inp, qw, kw, rstd, wdt, N, NH, NKV, HD);
}
mt_status mt_backend_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B,
                              int T, int NH, int NKV, int HD) {
    CALL(MT_OP_ROPE_FWD, rope_fwd, out, inp, cos, sin, B, T, NH, NKV, HD);
}
mt_status mt_backend_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B,
                              int T, int NH, int NKV, int HD) {
    CALL(MT_OP_ROPE_BWD, rope_bwd, dinp, dout, cos, sin, B, T, NH, NKV, HD);
}
mt_status mt_backend_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH,
                                   int NKV, int HD) {
    CALL(MT_OP_ATTENTION_FWD, attention_fwd, out, lse, qkv, B, T, NH, NKV, HD);
}
mt_status mt_backend_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                   const float *lse, int B, int T, int NH, int NKV, int HD) {
    CALL(MT_OP_ATTENTION_BWD, attention_bwd, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HD);
}
mt_status mt_backend_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F) {
    CALL(MT_OP_SWIGLU_FWD, swiglu_fwd, h, gu, N, F);
}
mt_status mt_backend_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F) {
    CALL(MT_OP_SWIGLU_BWD, swiglu_bwd, dgu, dh, gu, N, F);
}
mt_status mt_backend_add(mt_backend *be, void *out, const void *a, const void *b, size_t n) {
    CALL(MT_OP_ADD, add, out, a, b, n);
}
mt_status mt_backend_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                                  float dscale) {
    CALL(MT_OP_XENT_FWD_BWD, xent_fwd_bwd, logits, losses, targets, n, V, dscale);
}
mt_status mt_backend_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    CALL(MT_OP_CAST, cast, dst, dt, src, st, n);
}
mt_status mt_backend_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                     const void *w, mt_dtype wdt, int R, int D, float eps) {
    CALL(MT_OP_ADD_RMSNORM_FWD, add_rmsnorm_fwd, sum, out, rstd, a, b, w, wdt, R, D, eps);
}
mt_status mt_backend_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                     const void *w, const float *rstd, mt_dtype wdt, int R, int D) {
    CALL(MT_OP_RMSNORM_BWD_ADD, rmsnorm_bwd_add, dacc, dw, dout, inp, w, rstd, wdt, R, D);
}
mt_status mt_backend_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt, size_t n,
                           const mt_adamw_hparams *h, float wd, mt_stream_id st) {
    CALL(MT_OP_ADAMW, adamw, s, pdt, g, gdt, n, h, wd, st);
}
mt_status mt_backend_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st) {
    CALL(MT_OP_GRAD_SUMSQ, grad_sumsq, out, x, t, n, st);
}
mt_status mt_backend_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st) {
    CALL(MT_OP_GRAD_ADD, grad_add, dst, src, t, n, st);
}
mt_status mt_backend_trace_write(mt_backend *be, const char *path) { PLAIN(MT_OP_TRACE_WRITE, trace_write, path); }
double mt_backend_host_work_ms(mt_backend *be, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master) {
    return be->ops->host_work_ms(be, kind, n, wdt, master); // present wherever MT_CAP_VIRTUAL_TIME is
}

void mt_backend_destroy(mt_backend *be) {
    if (be && be->ops && be->ops->destroy) be->ops->destroy(be);
}

int mt_backend_has(const mt_backend *be, unsigned cap) { return (be->ops->caps & cap) == cap; }
unsigned mt_backend_caps(const mt_backend *be) { return be->ops->caps; }
const char *mt_backend_name(const mt_backend *be) { return be->ops->name; }

mt_status mt_backend_device_collective(mt_backend **bes, int n_ranks, mt_device_collective **out) {
    *out = NULL;
    const mt_backend_entry *e = mt_backend_entry_of(bes[0]);
    return e && e->collective ? e->collective(bes, n_ranks, out) : MT_OK;
}
