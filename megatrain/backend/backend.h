// backend.h: the one interface every backend (cpu, cuda, sim) implements:
// a table of function pointers plus a context (ggml-backend style).
//
// Conventions (llm.c letters): N = tokens in the pass (B*T), C = hidden size,
// V = vocab, F = ffn size, NH / NKV heads / kv heads, HD head dim.
// All pointers are device pointers unless named host_*. Activations are
// be->act_dtype (the cpu backend supports MT_F32 only); weights and weight
// gradients are `wdt` (MT_F32 or MT_BF16); rstd, lse, losses are always f32.
// Kernels run in order on the compute stream. Backward kernels OVERWRITE their
// outputs unless a flag says accumulate.
#ifndef MT_BACKEND_H
#define MT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

typedef enum { MT_STREAM_COMPUTE = 0, MT_STREAM_H2D = 1, MT_STREAM_D2H = 2, MT_NUM_STREAMS = 3 } mt_stream_id;
typedef enum { MT_COPY_H2D = 0, MT_COPY_D2H = 1, MT_COPY_D2D = 2 } mt_copy_kind;

typedef struct mt_event mt_event; // opaque, backend-defined
typedef struct mt_backend mt_backend;
typedef struct mt_backend_entry mt_backend_entry;         // its registry row (below)
typedef struct mt_device_collective mt_device_collective; // backend/device_collective.h

typedef struct {
    char name[128];          // "cpu (x86-64, 2 threads)", "NVIDIA H100 80GB HBM3"
    size_t mem_total_bytes;  // device memory (host RAM for cpu)
    size_t mem_free_bytes;
    int numa_node;           // nearest NUMA node of the device, -1 unknown
    size_t host_mem_avail_bytes; // host memory the model state may use (MemAvailable; sim: the profile's)
} mt_device_info;

// What a backend can do: the engine and the CLI ask these, never its name.
enum {
    MT_CAP_TENSOR_DATA = 1u << 0,  // kernels compute on real data (a virtual backend only prices them)
    MT_CAP_VIRTUAL_TIME = 1u << 1, // time is virtual: host work is priced (host_work_ms), not done
    MT_CAP_PAGE_LOCKED = 1u << 2,  // host_alloc page-locks memory (it counts against ulimit -l)
    MT_CAP_BF16 = 1u << 3,         // bf16 activations (else f32 only)
    MT_CAP_ASYNC = 1u << 4,        // streams run apart from the host: time work with events, not the host clock
    MT_CAP_DEVICE_MEMORY = 1u << 5, // dev_alloc is a device's own memory, not host RAM: what is free may be spent
};

// Host-side work the engine does between device operations; a virtual-time
// backend (sim) prices it instead of the engine doing it (engine/host_work.h).
typedef enum {
    MT_HOST_GRAD_ACCUMULATE = 0, // n elements of gradients: dst (+)= slab, plus the sum of squares
    MT_HOST_ADAMW = 1,           // n parameters through the fused AdamW pass
    // 2 was the speculative step's restore copies: gone with the out-of-place update
    MT_HOST_GRAD_SUMSQ = 3,      // the sum of squares of n gradients already in place (a direct copy)
    MT_HOST_ROWS_GATHER = 4,     // n weights (rows of the embedding) copied back to back into a staging block
} mt_host_work_kind;

// Flags for matmul_bwd. MT_DW_F32: dw (and dbias) are f32 buffers whatever wdt is, so
// a weight gradient computed in token chunks is summed in f32 across the chunks (with
// MT_ACC_DW) and rounded to wdt once, by the caller's cast, instead of once per chunk.
enum { MT_ACC_DINP = 1, MT_ACC_DW = 2, MT_DW_F32 = 4 };

// The entries of the table below, by id (mt_op_name, backend_call.h, names each).
typedef enum {
    MT_OP_DEV_ALLOC, MT_OP_HOST_ALLOC, MT_OP_EVENT_CREATE, MT_OP_EVENT_RECORD, MT_OP_STREAM_WAIT, MT_OP_EVENT_SYNC,
    MT_OP_STREAM_SYNC, MT_OP_EVENT_ELAPSED_MS, MT_OP_COPY, MT_OP_MEMSET_ZERO,
    MT_OP_EMBEDDING_FWD, MT_OP_EMBEDDING_BWD, MT_OP_MATMUL_FWD, MT_OP_MATMUL_BWD, MT_OP_RMSNORM_FWD, MT_OP_RMSNORM_BWD,
    MT_OP_QK_NORM_FWD, MT_OP_QK_NORM_BWD, MT_OP_ROPE_FWD, MT_OP_ROPE_BWD, MT_OP_ATTENTION_FWD, MT_OP_ATTENTION_BWD,
    MT_OP_SWIGLU_FWD, MT_OP_SWIGLU_BWD, MT_OP_ADD, MT_OP_XENT_FWD_BWD, MT_OP_CAST, MT_OP_ADD_RMSNORM_FWD,
    MT_OP_RMSNORM_BWD_ADD,
    MT_OP_HOST_WORK_MS, MT_OP_TRACE_WRITE, MT_OP_SET_ATTENTION,
    MT_OP_COUNT
} mt_op;

// One call of an op, as supports() is asked about it: its dtypes and dims in the
// letters of the op's own comment below (those it does not take stay 0).
typedef struct {
    mt_dtype act, wdt;     // activations (the backend's act_dtype); weights (cast: the source type)
    int N, C, OC, V;       // rows (N, R, n), width (C, IC, D, F), out width (OC), vocab (V)
    int B, T, NH, NKV, HD; // rope / attention / qk_norm (N rows of NH+2*NKV heads)
    unsigned flags;        // MT_SHAPE_*
} mt_op_shape;
enum {
    MT_SHAPE_IN_PLACE = 1u << 0, // the output is one of the inputs (rope, add, rmsnorm: out == inp)
    MT_SHAPE_BITWISE = 1u << 1,  // asked to give the same bits as another path to the same values:
                                 // bf16 weights as f32 weights rounded to bf16; fused as unfused
};

typedef struct mt_backend_ops {
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
    mt_status (*embedding_fwd)(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N, int C);
    // dwte(V,C) += scatter of dout(N,C) by ids (accumulates; caller zeroes)
    mt_status (*embedding_bwd)(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout, int N, int C);
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
    mt_status (*rope_bwd)(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B, int T,
                          int NH, int NKV, int HD);
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
} mt_backend_ops;


struct mt_backend {
    const mt_backend_ops *ops;
    mt_dtype act_dtype; // activation type the kernels use
    void *ctx;          // backend-private state
    unsigned long long copied_bytes[3]; // by mt_copy_kind, counted by mt_backend_copy (backend_call.h)
};

static inline int mt_backend_has(const mt_backend *be, unsigned cap) { return (be->ops->caps & cap) == cap; }
// The registry row of a created backend (its ops table knows it: no lookup by name).
static inline const mt_backend_entry *mt_backend_entry_of(const mt_backend *be) { return be->ops->entry; }

// ---- the registry (backend_registry.c): one row per backend compiled in ----
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

int mt_backend_count(void);                         // rows in the table
const mt_backend_entry *mt_backend_at(int i);       // row i, 0 <= i < mt_backend_count()
const mt_backend_entry *mt_backend_find(const char *name); // NULL when not compiled in
// MT_OK for "auto" or a row's name; else the error a --backend NAME gets: compiled out
// (cuda without nvcc) or unknown, listing the names there are.
mt_status mt_backend_check_name(const char *name);
// Creates a backend by name ("auto" = the first row with a device that is available,
// else cpu), with its arguments (a: NULL for f32 activations and no profile).
mt_status mt_backend_create_with(const char *name, const mt_backend_args *a, mt_backend **out);
// The devices a backend by name offers one process (--gpus): cuda the visible GPUs,
// cpu MT_CPU_DEVICES instances, others 1; 0 for an unknown name.
int mt_backend_device_count(const char *name);
// Creates a backend by name ("cpu", "cuda", "sim", "auto" = best present).
mt_status mt_backend_create(const char *name, mt_dtype act_dtype, mt_backend **out);
void mt_backend_destroy(mt_backend *be);
// Names of backends compiled into this binary, e.g. {"cpu","cuda","sim"}; returns count.
int mt_backend_list(const char **names, int max);
// The capabilities of a backend by name, before creating it (0 for an unknown or absent one;
// "auto" is the one it would pick).
unsigned mt_backend_caps_of(const char *name);

// Attention implementations (--attention). The cuda backend has two: "native", its own
// kernels (backends/cuda/attention_kernels.cuh), and "cudnn", cuDNN's fused flash
// attention (backends/cuda/cudnn_attention.c), compiled where the cuDNN headers are and
// used where libcudnn.so.9 loads at run time. AUTO: cudnn when it loads, else native; the
// cuda backend says which on stderr at its first attention call. cpu has one
// implementation and accepts auto and native; sim accepts all three and prices the one
// chosen at its profile's measured rate (mt_hw_attention_tflops).
typedef enum { MT_ATTN_AUTO = 0, MT_ATTN_NATIVE = 1, MT_ATTN_CUDNN = 2 } mt_attn_impl;
// Parses "auto", "native" or "cudnn" (the --attention values).
mt_status mt_attn_impl_parse(const char *name, mt_attn_impl *out);
// Picks the attention implementation of a created backend (an explicit cudnn that cannot
// load fails here, naming why; AUTO falls back to native).
mt_status mt_backend_set_attention(mt_backend *be, mt_attn_impl impl);
// The name a hardware profile measures `impl` under (gpu.attention_tflops.<name>):
// "native" or "cudnn"; AUTO is what the cuda backend picks on a machine with cuDNN:
// cudnn for bf16 activations, native for f32 (cuDNN's fused attention takes bf16).
const char *mt_attn_kernel_name(mt_attn_impl impl, int bf16);
// Names of the attention implementations compiled in, e.g. {"native","cudnn"}; returns count.
int mt_attention_list(const char **names, int max);

// Backend constructors (each defined in its backends/<name>/ directory).
mt_status mt_backend_cpu_create(mt_dtype act_dtype, mt_backend **out);
mt_status mt_backend_cuda_create(mt_dtype act_dtype, mt_backend **out);
// On CUDA device `device` (0: MT_CUDA_DEVICE's, else 0), for a rank of --gpus N.
mt_status mt_backend_cuda_create_on(mt_dtype act_dtype, int device, mt_backend **out);
// The simulator prices every op with the hardware profile at `profile_path`
// (experiments/hardware/NAME.json).
mt_status mt_backend_sim_create(const char *profile_path, mt_dtype act_dtype, mt_backend **out);
int mt_backend_cuda_available(void); // 1 when a CUDA device can be opened
// Each backend's capabilities (its ops table's caps).
unsigned mt_backend_cpu_caps(void);
unsigned mt_backend_cuda_caps(void);
unsigned mt_backend_sim_caps(void);
mt_status mt_backend_cuda_set_attention(mt_backend *be, mt_attn_impl impl); // see mt_backend_set_attention

#endif
