// sim_internal.h: the sim backend's context, shared by sim_backend.c (memory,
// streams, events, copies), sim_kernels.c (pricing the layer kernels) and
// sim_trace.c (the recorded timeline: stats, op counts, Chrome trace JSON).
// One mutex guards it: the engine's host threads (main, gradient drain,
// optimizer) call in concurrently.
#ifndef MT_SIM_INTERNAL_H
#define MT_SIM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "backend/backend_impl.h"
#include "backends/sim/sim.h"

// Lanes of the timeline: 0..2 the streams, MT_NUM_STREAMS + i host thread i.
#define MT_SIM_HOST_LANE0 MT_NUM_STREAMS
#define MT_SIM_TRACE_CAP 4000000 // ops kept for the trace (~190 MB); stats count past it

struct mt_event {
    double t_ms;
    int recorded;
};

typedef struct {
    double start, end; // virtual ms
    double amount;     // in `unit`
    const char *name;  // static string
    int lane, unit;
} mt_sim_rec;

enum { MT_SIM_BYTES = 0, MT_SIM_FLOPS = 1, MT_SIM_ELEMENTS = 2 }; // unit of a record's amount

typedef struct {
    double start, end;
} mt_sim_iv;

typedef struct {
    double start, end, gbps; // a host pass's demand on the shared host memory
} mt_sim_load;

typedef struct {
    uintptr_t base;
    size_t bytes;
} mt_sim_block;

typedef struct {
    mt_hw_profile prof;
    mt_dtype act;
    char attn_kernel[32]; // the attention implementation priced (mt_sim_set_attention_kernel)
    pthread_mutex_t mu;
    pthread_t creator;
    unsigned long id; // distinguishes instances for the thread-local lane ids

    double clock[MT_NUM_STREAMS]; // end of the last op enqueued on each stream
    double link_free[2];          // per copy direction: end of the last copy
    mt_sim_iv *iv[2];             // per direction: intervals of past copies (sorted, disjoint)
    size_t n_iv[2], cap_iv[2];
    mt_sim_load *load;            // host passes not yet behind both links (pruned as copies pass them)
    size_t n_load, cap_load;

    uintptr_t dev_next; // bump pointer in the fake device range
    mt_sim_block *dev, *host;
    size_t n_dev, cap_dev, n_host, cap_host;

    mt_sim_rec *rec;
    size_t n_rec, cap_rec;
    mt_sim_stats st; // accumulated as ops are priced
} mt_sim_ctx;

// Enqueues one op of `ms` on stream s for the calling host thread (which pays
// MT_SIM_LAUNCH_MS) and records it. Caller holds ctx->mu. Returns the op's end.
double mt_sim_enqueue_locked(mt_sim_ctx *c, int s, const char *name, double ms, double amount, int unit);
// Appends one record to the timeline and the stats. Caller holds ctx->mu.
void mt_sim_record_locked(mt_sim_ctx *c, int lane, const char *name, double start, double end, double amount,
                          int unit);
// The calling thread's host lane (assigned on first use; `kind` names it). Caller holds ctx->mu.
int mt_sim_host_lane_locked(mt_sim_ctx *c, const char *kind);

// The registry row's device collective (sim_collective.c): --gpus N's reduce-scatter priced.
mt_status mt_sim_collective_create(mt_backend **bes, int n_ranks, mt_device_collective **out);

// The layer kernels' entries (sim_kernels.c): each prices its op, touches no data.
mt_status mt_sim_op_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N,
                                  int C);
mt_status mt_sim_op_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout,
                                  int N, int C);
mt_status mt_sim_op_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias,
                               mt_dtype wdt, int N, int IC, int OC);
mt_status mt_sim_op_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                               const void *w, mt_dtype wdt, int N, int IC, int OC, int flags);
mt_status mt_sim_op_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt,
                                int R, int D, float eps);
mt_status mt_sim_op_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                                const float *rstd, mt_dtype wdt, int R, int D);
mt_status mt_sim_op_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                    const void *w, mt_dtype wdt, int R, int D, float eps);
mt_status mt_sim_op_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                    const void *w, const float *rstd, mt_dtype wdt, int R, int D);
mt_status mt_sim_op_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw,
                                const void *kw, mt_dtype wdt, int N, int NH, int NKV, int HD, float eps);
mt_status mt_sim_op_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                                const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH,
                                int NKV, int HD);
mt_status mt_sim_op_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD);
mt_status mt_sim_op_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD);
mt_status mt_sim_op_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH,
                                  int NKV, int HD);
mt_status mt_sim_op_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                  const float *lse, int B, int T, int NH, int NKV, int HD);
mt_status mt_sim_op_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F);
mt_status mt_sim_op_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F);
mt_status mt_sim_op_add(mt_backend *be, void *out, const void *a, const void *b, size_t n);
mt_status mt_sim_op_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                                 float dscale);
mt_status mt_sim_op_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);
mt_status mt_sim_trace_write(mt_backend *be, const char *path);

static inline mt_sim_ctx *mt_sim_ctx_of(mt_backend *be) { return (mt_sim_ctx *)be->ctx; }

// sim_adamw.c: the device optimizer's entries, priced at the HBM rate.
double mt_sim_adamw_bytes_per_elem(mt_dtype pdt, mt_dtype gdt, int master);
mt_status mt_sim_op_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                          size_t n, const mt_adamw_hparams *h, float wd, mt_stream_id st);
mt_status mt_sim_op_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st);
mt_status mt_sim_op_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st);

#endif
