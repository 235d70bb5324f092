// grad_ops.h: host-side gradient kernels used while gradients stream out of the
// device: accumulate a slab into the host gradients, and the sum of squares for
// the global norm. Threaded; results do not depend on the thread count (fixed
// block partition, blocks summed in order).
#ifndef MT_GRAD_OPS_H
#define MT_GRAD_OPS_H

#include <stddef.h>

#include "core/dtype.h"

// dst = src (first != 0) or dst = dst + src (f32 add, rounded to t when bf16).
void mt_grad_accumulate(void *dst, const void *src, mt_dtype t, size_t n, int first);
// Sum of squares of n elements in double precision.
double mt_grad_sumsq(const void *x, mt_dtype t, size_t n);
// x *= s (used by nothing on the hot path; AdamW applies the clip factor on the fly).
void mt_grad_scale(void *x, mt_dtype t, size_t n, float s);

#endif
