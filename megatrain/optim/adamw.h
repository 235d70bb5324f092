// adamw.h: the host AdamW, one fused, vectorised (AVX-512/AVX2 on x86, SVE/NEON on
// aarch64, scalar fallback),
// threaded pass over p, g, m, v — torch.optim.AdamW semantics:
//   g' = g * grad_scale                        (clip factor, 1 when not clipping)
//   p  = p * (1 - lr * wd)                     (decoupled decay; wd = 0 for 1-D tensors)
//   m  = m + (g' - m) * (1 - beta1)
//   v  = v * beta2 + (1 - beta2) * g'^2
//   p  = p - lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// Precision modes: `p` is F32 or BF16 (rounded to nearest even after the update);
// with `master` (mixed mode) the f32 master is updated and p receives bf16(master).
#ifndef MT_ADAMW_H
#define MT_ADAMW_H

#include <stddef.h>

#include "core/dtype.h"

typedef struct {
    float lr, beta1, beta2, eps;
    float grad_scale; // clip factor applied to g on the fly
    int step;         // 1-based step number, for bias correction
} mt_adamw_hparams;

// Updates n elements. master may be NULL. wd is this tensor's weight decay.
// Bitwise identical results for any thread count (each element independent).
void mt_adamw_update(float *master, void *p, mt_dtype pdt, const void *g, mt_dtype gdt, float *m, float *v, size_t n,
                     const mt_adamw_hparams *h, float wd);

// What AdamW reads and writes of n elements: the weights (pdt), the moments and
// the f32 master (mixed precision; NULL otherwise, and then in both).
typedef struct {
    void *p;
    float *m, *v, *master;
} mt_adamw_state;

// Out of place: reads `in`, writes `out`, bitwise what mt_adamw_update would leave
// in `in`; `in` is not written (out == in: in place). The speculative step's update,
// kept by a pointer swap and dropped at no cost (engine/optimizer_worker.h).
void mt_adamw_update_to(const mt_adamw_state *out, const mt_adamw_state *in, mt_dtype pdt, const void *g,
                        mt_dtype gdt, size_t n, const mt_adamw_hparams *h, float wd);

// Elements [lo, hi) of a tensor.
typedef struct {
    size_t lo, hi;
} mt_elem_range;

// In place, only the elements in `r` (nr sorted, disjoint ranges): each bitwise what
// mt_adamw_update gives it. The embedding's rows a batch reads, updated first.
void mt_adamw_update_ranges(const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                            const mt_elem_range *r, size_t nr, const mt_adamw_hparams *h, float wd);

// Which SIMD path mt_adamw_update uses on this CPU: "avx512", "avx2", "sve", "neon"
// or "scalar" (mt_simd_best(); MT_SIMD can pick a lower one).
const char *mt_adamw_isa(void);

// Scalar reference (tests, and the definition the fast path must match).
void mt_adamw_update_ref(float *master, void *p, mt_dtype pdt, const void *g, mt_dtype gdt, float *m, float *v,
                         size_t n, const mt_adamw_hparams *h, float wd);

#endif
