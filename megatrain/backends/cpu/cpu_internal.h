// cpu_internal.h: the cpu backend's private state and shared declarations; each cpu_<family>.c holds
// plain f32 passes and the ops-table entry wrapping them. Every reduction runs in an order fixed by the
// shapes alone, so results are bitwise the same for any OMP thread count; GEMMs go to OpenBLAS outside
// OpenMP regions.
#ifndef MT_CPU_INTERNAL_H
#define MT_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend_impl.h"
#include "backends/cpu/cpu.h"

// Scratch slots: one growable buffer per purpose, so that one kernel never
// overwrites the scratch another still reads within the same call.
enum {
    MT_CPU_SCR_W = 0,  // f32 copy of bf16 weights
    MT_CPU_SCR_DW,     // f32 weight gradients before rounding to bf16, a block of rows at a time
    MT_CPU_SCR_RED,    // per-block partial sums of reductions (double)
    MT_CPU_SCR_TILE,   // per-thread attention tiles
    MT_CPU_SCR_ROWS,   // attention D_i = rowsum(dout * out)
    MT_CPU_SCR_IDX,    // embedding_bwd sort keys
    MT_CPU_NSCR
};

// A bf16 weight gradient's rows formed in f32 per block: 16 Mi floats (64 MiB) of scratch at most,
// unless one row is longer (engine/footprint.c plans the same).
#define MT_CPU_DW_BLOCK_FLOATS ((size_t)16 << 20)

typedef struct {
    void *buf[MT_CPU_NSCR];
    size_t cap[MT_CPU_NSCR];
} mt_cpu_ctx;

// Returns a 64-byte aligned buffer of at least `bytes` for slot (contents
// not preserved when it grows). Kernels on one backend are not reentrant.
mt_status mt_cpu_scratch(mt_backend *be, int slot, size_t bytes, void **out);
// Weights as f32: w itself when wdt is F32, else a converted copy in slot.
mt_status mt_cpu_weights_f32(mt_backend *be, int slot, const void *w, mt_dtype wdt, size_t n, const float **out);
// Threaded bf16 -> f32 conversion.
void mt_cpu_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
mt_status mt_cpu_check_wdt(mt_dtype wdt, const char *op);
// OpenBLAS's and OpenMP's threads and buffers mapped once per process, within the
// address-space limits, or an error naming the limit (cpu_blas_reserve.c).
mt_status mt_cpu_blas_reserve(void);

// Rows per reduction block: a function of the row count only, never of the
// thread count, so that block partial sums (added in block order) are
// reproducible. At most MT_CPU_MAX_BLOCKS blocks.
#define MT_CPU_MAX_BLOCKS 64
static inline int mt_cpu_block_rows(int R) {
    int rb = (R + MT_CPU_MAX_BLOCKS - 1) / MT_CPU_MAX_BLOCKS;
    return rb < 16 ? 16 : rb;
}

// exp(x), Cephes-style polynomial (about 1.4 ulp on [-87, 88]). Written so
// that loops calling it vectorize without -ffast-math: the clamps and the NaN
// pass-through are integer selects on the bits (float compares are not
// if-converted under the default -ftrapping-math). x < -87 (including -inf)
// gives ~2^-126 instead of 0 or a denormal; x > 88 gives exp(88); NaN stays NaN.
static inline float mt_cpu_expf(float x) {
    union { float f; uint32_t u; int32_t i; } b = {x};
    uint32_t nan_mask = 0u - (uint32_t)((b.u & 0x7fffffffu) > 0x7f800000u);
    b.u = b.u > 0xC2AE0000u ? 0xC2AE0000u : b.u; // negative floats order as unsigned: x < -87
    b.i = b.i > 0x42B00000 ? 0x42B00000 : b.i;   // positive floats order as signed: x > 88
    x = b.f;
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round(x / ln 2)
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    union { int32_t i; float f; } s;
    s.i = ((int32_t)n + 127) << 23;
    union { float f; uint32_t u; } y = {p * s.f};
    y.u = (y.u & ~nan_mask) | (0x7fc00000u & nan_mask);
    return y.f;
}

// Hot tile kernels are compiled for AVX-512, AVX2+FMA and baseline x86-64
// and picked at load time (GCC function multiversioning), since the build
// itself targets baseline x86-64. Results are deterministic on one machine.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MT_CPU_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MT_CPU_MULTIVERSION
#endif

// ---- ops-table entries (one per kernel in backend.h) ----
mt_status mt_cpu_op_embedding_fwd(mt_backend *be, void *out, const int32_t *ids, const void *wte, mt_dtype wdt, int N,
                                  int C);
mt_status mt_cpu_op_embedding_bwd(mt_backend *be, void *dwte, mt_dtype wdt, const int32_t *ids, const void *dout, int N,
                                  int C);
mt_status mt_cpu_op_matmul_fwd(mt_backend *be, void *out, const void *inp, const void *w, const void *bias,
                               mt_dtype wdt, int N, int IC, int OC);
mt_status mt_cpu_op_matmul_bwd(mt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                               const void *w, mt_dtype wdt, int N, int IC, int OC, int flags);
mt_status mt_cpu_op_rmsnorm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *w, mt_dtype wdt,
                                int R, int D, float eps);
mt_status mt_cpu_op_rmsnorm_bwd(mt_backend *be, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                                const float *rstd, mt_dtype wdt, int R, int D);
mt_status mt_cpu_op_add_rmsnorm_fwd(mt_backend *be, void *sum, void *out, float *rstd, const void *a, const void *b,
                                    const void *w, mt_dtype wdt, int R, int D, float eps);
mt_status mt_cpu_op_rmsnorm_bwd_add(mt_backend *be, void *dacc, void *dw, const void *dout, const void *inp,
                                    const void *w, const float *rstd, mt_dtype wdt, int R, int D);
mt_status mt_cpu_op_qk_norm_fwd(mt_backend *be, void *out, float *rstd, const void *inp, const void *qw, const void *kw,
                                mt_dtype wdt, int N, int NH, int NKV, int HD, float eps);
mt_status mt_cpu_op_qk_norm_bwd(mt_backend *be, void *dinp, void *dqw, void *dkw, const void *dout, const void *inp,
                                const void *qw, const void *kw, const float *rstd, mt_dtype wdt, int N, int NH, int NKV,
                                int HD);
mt_status mt_cpu_op_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD);
mt_status mt_cpu_op_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD);
mt_status mt_cpu_op_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                                  int HD);
mt_status mt_cpu_op_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                  const float *lse, int B, int T, int NH, int NKV, int HD);
mt_status mt_cpu_op_swiglu_fwd(mt_backend *be, void *h, const void *gu, int N, int F);
mt_status mt_cpu_op_swiglu_bwd(mt_backend *be, void *dgu, const void *dh, const void *gu, int N, int F);
mt_status mt_cpu_op_add(mt_backend *be, void *out, const void *a, const void *b, size_t n);
mt_status mt_cpu_op_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                                 float dscale);
mt_status mt_cpu_op_cast(mt_backend *be, void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);
// cpu_adamw.c: the device optimizer's entries, the host's code on host memory.
mt_status mt_cpu_op_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                          size_t n, const mt_adamw_hparams *h, float wd, mt_stream_id st);
mt_status mt_cpu_op_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st);
mt_status mt_cpu_op_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st);

#endif
