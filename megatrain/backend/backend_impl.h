// backend_impl.h: what a backend implements (ggml's ggml-backend-impl.h): its ops table and
// its registry row. Included by the backends (backends/NAME/), the calls over them
// (backend_call.c) and the registry; the engine sees neither (backend.h, backend_call.h).
//
// Conventions (llm.c letters): N = tokens in the pass (B*T), C = hidden size,
// V = vocab, F = ffn size, NH / NKV heads / kv heads, HD head dim.
// All pointers are device pointers unless named host_*. Activations are
// be->act_dtype (the cpu backend supports MT_F32 only); weights and weight
// gradients are `wdt` (MT_F32 or MT_BF16); rstd, lse, losses are always f32.
// Kernels run in order on the compute stream. Backward kernels OVERWRITE their
// outputs unless a flag says accumulate.
#ifndef MT_BACKEND_IMPL_H
#define MT_BACKEND_IMPL_H

#include "backend/backend.h"
#include "backend/device_collective.h"

struct mt_backend_ops {
    const char *name; // "cpu", "cuda", "sim": for messages, never for decisions (use caps)
    unsigned caps;    // MT_CAP_*
    const mt_backend_entry *entry; // its own registry row: what the engine asks of its kind
    void (*destroy)(mt_backend *be);
    mt_status (*device_info)(mt_backend *be, mt_device_info *out);

    // ---- memory ----
    mt_status (*dev_alloc)(mt_backend *be, size_t bytes, void **out);
    void (*dev_free)(mt_backend *be, void *p);
    // Page-locked host memory for async copies (cpu: page-aligned malloc; sim:
    // an unbacked reservation). Callers pin in bounded slabs: one per model unit
    // (engine/host_state.h), one per gradient slab, one per offloaded checkpoint.
    mt_status (*host_alloc)(mt_backend *be, size_t bytes, void **out);
    void (*host_free)(mt_backend *be, void *p, size_t bytes);

    // ---- streams and events ----
    mt_status (*event_create)(mt_backend *be, mt_event **out);
    void (*event_destroy)(mt_backend *be, mt_event *ev);
    mt_status (*event_record)(mt_backend *be, mt_event *ev, mt_stream_id s);
    mt_status (*stream_wait)(mt_backend *be, mt_stream_id s, mt_event *ev); // s waits for ev
    mt_status (*event_sync)(mt_backend *be, mt_event *ev);                  // host waits for ev
    mt_status (*stream_sync)(mt_backend *be, mt_stream_id s);
    // Milliseconds between two recorded, completed events.
    mt_status (*event_elapsed_ms)(mt_backend *be, mt_event *start, mt_event *end, float *ms);
    mt_status (*copy)(mt_backend *be, void *dst, const void *src, size_t bytes, mt_copy_kind kind, mt_stream_id s);
    mt_status (*memset_zero)(mt_backend *be, void *dst, size_t bytes, mt_stream_id s);

    // ---- layer kernels (compute stream) ----
    // out(N,C) = wte[ids[n], :]
    mt_status (*embedding_fwd)(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N,
                               int C);
    // dwte(V,C) += scatter of dout(N,C) by ids (accumulates; caller zeroes)
    mt_status (*embedding_bwd)(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout, int N,
                               int C);
    // out(N,OC) = inp(N,IC) @ w(OC,IC)^T + bias(OC)   (bias may be NULL)
    mt_status (*matmul_fwd)(mt_backend *be, void *out, const void *inp, const void *w, const void *bias, mt_dtype wdt,
                            int N, int IC, int OC);
    // dinp(N,IC) = dout @ w (skipped if dinp NULL); dw(OC,IC) = dout^T @ inp; dbias(OC) = sum_n dout
    // (dbias skipped if NULL). flags: MT_ACC_DINP / MT_ACC_DW turn "=" into "+=" (dbias follows dw);
    // MT_DW_F32: dw and dbias are f32 (the product is accumulated in f32 and never rounded to wdt).
    mt_status (*matmul_bwd)(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                            const void *w, mt_dtype wdt, int N, int IC, int OC, int flags);
    // RMSNorm over rows: out(R,D) = inp / sqrt(mean(inp^2) + eps) * w(D); rstd(R) saved.
    mt_status (*rmsnorm_fwd)(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt,
                             int R, int D, float eps);
    // dinp(R,D) = ...; dw(D) = sum over rows (overwrites).
    mt_status (*rmsnorm_bwd)(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                             const float *rstd, mt_dtype wdt, int R, int D);
    // Packed qkv rows: each token's row is [q: NH*HD | k: NKV*HD | v: NKV*HD] (QKV = NH+2*NKV heads).
    // Per-head RMSNorm of the q heads (weight qw(HD)) and k heads (kw(HD)); v copied. rstd(N, NH+NKV).
    mt_status (*qk_norm_fwd)(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw, const void *kw,
                             mt_dtype wdt, int N, int NH, int NKV, int HD, float eps);
    mt_status (*qk_norm_bwd)(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                             const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH, int NKV,
                             int HD);
    // HF rotate-half RoPE on the q and k heads of packed qkv (B,T,QKV*HD); v copied; in place allowed.
    // cos/sin: (T, HD/2) f32 tables for positions 0..T-1.
    mt_status (*rope_fwd)(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B, int T,
                          int NH, int NKV, int HD);
    mt_status (*rope_bwd)(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B,
                          int T, int NH, int NKV, int HD);
    // Causal GQA attention, scale 1/sqrt(HD), flash-style (no T x T matrix):
    // out(B,T,NH*HD) from packed qkv(B,T,QKV*HD); lse(B,NH,T) saved.
    mt_status (*attention_fwd)(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                               int HD);
    // dqkv(B,T,QKV*HD) overwritten from dout(B,T,NH*HD).
    mt_status (*attention_bwd)(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                               const float *lse, int B, int T, int NH, int NKV, int HD);
    // gu rows are [gate(F) | up(F)]: h(N,F) = silu(gate) * up
    mt_status (*swiglu_fwd)(mt_backend *be, void *h, const void *gu, int N, int F);
    mt_status (*swiglu_bwd)(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F);
    // out(n) = a(n) + b(n)  (activations; out may alias a or b)
    mt_status (*add)(mt_backend *be, void *out, const void *a, const void *b, size_t n);
    // Softmax cross-entropy on a chunk of logits(n,V) (activations), in place:
    // losses[i] = logsumexp(logits[i]) - logits[i][targets[i]]  (f32)
    // logits[i] <- dscale * (softmax(logits[i]) - onehot(targets[i]))
    mt_status (*xent_fwd_bwd)(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                              float dscale);
    // dst(n) = src(n) converted between dtypes (device).
    mt_status (*cast)(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);
    // Residual add fused with the RMSNorm after it (one pass instead of add + rmsnorm_fwd, the
    // same values): sum(R,D) = a + b (sum may alias a or b; stored as an activation), then
    // out(R,D) = rmsnorm(sum) * w and rstd(R) as rmsnorm_fwd.
    mt_status (*add_rmsnorm_fwd)(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                 const void *w, mt_dtype wdt, int R, int D, float eps);
    // rmsnorm_bwd whose input gradient is added into dacc(R,D) (the residual stream's gradient)
    // instead of overwriting a buffer: the same values as rmsnorm_bwd into a temporary then add.
    // dacc may not alias dout or inp; dw(D) is overwritten.
    mt_status (*rmsnorm_bwd_add)(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                 const void *w, const float *rstd, mt_dtype wdt, int R, int D);

    // ---- virtual time (MT_CAP_VIRTUAL_TIME only; NULL on backends that compute) ----
    // Milliseconds the host would spend on `kind` over n elements of gradient type
    // wdt, with `master` f32 weights present (mixed precision); the priced host
    // work (engine/host_work.h) advances the calling thread's virtual clock by it.
    double (*host_work_ms)(mt_backend *be, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master);
    // Writes the Chrome/Perfetto trace of everything simulated so far (may be NULL).
    mt_status (*trace_write)(mt_backend *be, const char *path);

    // ---- choices (NULL: the backend has one way) ----
    // Picks the attention implementation (mt_attn_impl, below): cuda's native kernels or cuDNN.
    mt_status (*set_attention)(mt_backend *be, int impl);

    // ---- what it takes (NULL: every shape of every entry it has) ----
    // 1 when a call of op (an mt_op) with shape s is within what this backend does: dtypes,
    // dims, aliasing. be may be NULL (asked before creating one: the defaults).
    int (*supports)(const mt_backend *be, mt_op op, const mt_op_shape *s);

    // ---- the device's share of the optimizer (NULL: none; --device-optimizer stays off) ----
    // Last in the table so the positional tables (cuda's) need only append. AdamW over n
    // elements of a state in device memory (s->p in pdt, s->m, s->v, s->master or NULL; g in
    // gdt) on stream st: bitwise what mt_adamw_update gives on the host (optim/adamw.h).
    mt_status (*adamw)(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt, size_t n,
                       const mt_adamw_hparams *h, float wd, mt_stream_id st);
    // *out (device memory, one double) = the sum of squares of n gradients at x, bitwise
    // mt_grad_sumsq's (its fixed blocks, lanes and order: optim/grad_ops_isa.h), on stream st.
    mt_status (*grad_sumsq)(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st);
    // dst(n) = dst + src in type t (f32 sum, rounded to t): bitwise mt_grad_accumulate's add, the
    // micro-batches' gradient sum of a unit whose gradients stay on the device.
    mt_status (*grad_add)(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st);
};

// ---- its registry row (backend_registry.h lists them) ----
// What creating one takes: the activation type, and for a virtual-time backend the
// hardware profile it prices with (a path; NULL elsewhere).
typedef struct {
    mt_dtype act_dtype;
    const char *profile_path;
    int device; // which of the backend's devices (0 .. device_count - 1): a rank of --gpus N
} mt_backend_args;

// Another code path of a backend, chosen by an environment setting when it is created
// (MT_GEMM_FALLBACK=1: cuda's classic-cuBLAS GEMMs). The op tests rerun the cases of
// `ops` on it.
typedef struct {
    const char *env;          // "NAME=VALUE", set while the backend is created and its attention chosen
    unsigned long long ops;   // 1ull << mt_op: the ops it changes
    int attention;            // mt_attn_impl to choose on it (MT_ATTN_AUTO: leave the default)
    int act_bf16_only;        // 1: only with bf16 activations
} mt_backend_variant;

// A backend is its folder (backends/NAME/) plus one row in the registry's table. The CLI
// (--backend), the planner and the tests (test_backend_ops) find backends only here.
struct mt_backend_entry {
    const char *name;    // --backend NAME
    const char *summary; // one line for listings
    unsigned caps;       // MT_CAP_* (its ops table's)
    int (*available)(void); // 1 when it can be created on this machine (NULL: always)
    mt_status (*create)(const mt_backend_args *a, mt_backend **out);
    // Its ops table's supports() (NULL: every shape): what it takes, asked before creating one.
    int (*supports)(const mt_backend *be, mt_op op, const mt_op_shape *s);
    const mt_backend_variant *variants; // its other code paths (may be NULL)
    int n_variants;
    // How many devices one process may open (--gpus auto takes them all; NULL: one).
    int (*device_count)(void);
    // --gpus N: how N of its backends (one per device) reduce the ranks' gradients on the
    // devices (backend/device_collective.h; cuda: NCCL). NULL: the host sums them, in rank
    // order; either way the engine lands them (engine/collective.h).
    mt_status (*collective)(mt_backend **bes, int n_ranks, mt_device_collective **out);
};

// The registry row of a created backend (its ops table knows it: no lookup by name).
static inline const mt_backend_entry *mt_backend_entry_of(const mt_backend *be) { return be->ops->entry; }

#endif
