// backend_call.h: the way into a backend for everything that is not one (as ggml's ggml_backend_*):
// mt_backend_<op>() calls the table entry of that name, refuses one the backend lacks (MT_ERR_UNSUPPORTED),
// names backend and op in a failure's error, and counts each kind of copy's bytes. Trace spans and the
// step's link bytes sit in the engine (engine/traced_copy.h), where a copy's purpose is known.
#ifndef MT_BACKEND_CALL_H
#define MT_BACKEND_CALL_H

#include "backend/backend.h"

// mt_op, the id of each table entry, is in backend/backend.h (supports() takes it).

// 1 when the backend has the table entry for `op`.
int mt_backend_supports(const mt_backend *be, mt_op op);
// 1 when the backend has the entry and takes this call of it: its dtypes (s->act must be
// the backend's activation type), its dims and flags (its supports(), backend.h).
int mt_backend_supports_shape(const mt_backend *be, mt_op op, const mt_op_shape *s);
const char *mt_op_name(mt_op op);
// Bytes moved by copies of `kind` through mt_backend_copy since the backend was created.
double mt_backend_copied_bytes(const mt_backend *be, mt_copy_kind kind);

mt_status mt_backend_device_info(mt_backend *be, mt_device_info *out);
mt_status mt_backend_dev_alloc(mt_backend *be, size_t bytes, void **out);
void mt_backend_dev_free(mt_backend *be, void *p);
mt_status mt_backend_host_alloc(mt_backend *be, size_t bytes, void **out);
void mt_backend_host_free(mt_backend *be, void *p, size_t bytes);
mt_status mt_backend_event_create(mt_backend *be, mt_event **out);
void mt_backend_event_destroy(mt_backend *be, mt_event *ev); // NULL is fine
mt_status mt_backend_event_record(mt_backend *be, mt_event *ev, mt_stream_id s);
mt_status mt_backend_stream_wait(mt_backend *be, mt_stream_id s, mt_event *ev);
mt_status mt_backend_event_sync(mt_backend *be, mt_event *ev);
mt_status mt_backend_stream_sync(mt_backend *be, mt_stream_id s);
mt_status mt_backend_event_elapsed_ms(mt_backend *be, mt_event *start, mt_event *end, float *ms);
mt_status mt_backend_copy(mt_backend *be, void *dst, const void *src, size_t bytes, mt_copy_kind kind, mt_stream_id s);
mt_status mt_backend_memset_zero(mt_backend *be, void *dst, size_t bytes, mt_stream_id s);

// The layer kernels: shapes and conventions as in backend_impl.h.
mt_status mt_backend_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N,
                                   int C);
mt_status mt_backend_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout,
                                   int N, int C);
mt_status mt_backend_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias,
                                mt_dtype wdt, int N, int IC, int OC);
mt_status mt_backend_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                                const void *w, mt_dtype wdt, int N, int IC, int OC, int flags);
mt_status mt_backend_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt,
                                 int R, int D, float eps);
mt_status mt_backend_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp,
                                 const void *w, const float *rstd, mt_dtype wdt, int R, int D);
mt_status mt_backend_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw,
                                 const void *kw, mt_dtype wdt, int N, int NH, int NKV, int HD, float eps);
mt_status mt_backend_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                                 const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH,
                                 int NKV, int HD);
mt_status mt_backend_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B,
                              int T, int NH, int NKV, int HD);
mt_status mt_backend_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B,
                              int T, int NH, int NKV, int HD);
mt_status mt_backend_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH,
                                   int NKV, int HD);
mt_status mt_backend_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                   const float *lse, int B, int T, int NH, int NKV, int HD);
mt_status mt_backend_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F);
mt_status mt_backend_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F);
mt_status mt_backend_add(mt_backend *be, void *out, const void *a, const void *b, size_t n);
mt_status mt_backend_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                                  float dscale);
mt_status mt_backend_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);
mt_status mt_backend_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                     const void *w, mt_dtype wdt, int R, int D, float eps);
mt_status mt_backend_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                     const void *w, const float *rstd, mt_dtype wdt, int R, int D);
// The device's share of the optimizer (backend.h): bitwise the host's AdamW and sum of squares.
mt_status mt_backend_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt, size_t n,
                           const mt_adamw_hparams *h, float wd, mt_stream_id st);
mt_status mt_backend_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st);
mt_status mt_backend_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st);
// Virtual time only (MT_CAP_VIRTUAL_TIME): what host work of `kind` would cost, in ms.
double mt_backend_host_work_ms(mt_backend *be, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master);
// The backend's capabilities (MT_CAP_*).
unsigned mt_backend_caps(const mt_backend *be);
// The backend's name, for messages (decisions ask its capabilities).
const char *mt_backend_name(const mt_backend *be);
// Only where the backend records a timeline of its own (mt_backend_supports(be, MT_OP_TRACE_WRITE)).
mt_status mt_backend_trace_write(mt_backend *be, const char *path);

#endif
