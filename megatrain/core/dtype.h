// dtype.h: element types of stored tensors and the conversions between them.
// bf16 and f16 are stored as uint16_t; rounding is round-to-nearest-even (as torch).
// The engine computes in F32 and BF16; F16 is a file type only (older HF
// checkpoints): it is read and widened, never written or streamed.
#ifndef MT_DTYPE_H
#define MT_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { MT_F32 = 0, MT_BF16 = 1, MT_F16 = 2 } mt_dtype;

static inline size_t mt_dtype_size(mt_dtype t) { return t == MT_F32 ? 4 : 2; }
static inline const char *mt_dtype_name(mt_dtype t) { return t == MT_F32 ? "F32" : t == MT_BF16 ? "BF16" : "F16"; }

static inline float mt_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t mt_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// IEEE half <-> f32 (dtype.c, through the compiler's _Float16, kept out of this
// header because the CUDA sources include it as C++). Widening is exact: every
// f16 value is an f32, and within bf16's range too (f16's largest is 65504, its
// smallest subnormal 2^-24); narrowing rounds to nearest even.
float mt_f16_to_f32(uint16_t h);
uint16_t mt_f32_to_f16(float f);

// Loads element i of a buffer of type t as f32 (for non-hot paths and tests).
static inline float mt_load_f32(const void *p, mt_dtype t, size_t i) {
    if (t == MT_F32) return ((const float *)p)[i];
    return t == MT_BF16 ? mt_bf16_to_f32(((const uint16_t *)p)[i]) : mt_f16_to_f32(((const uint16_t *)p)[i]);
}
static inline void mt_store_f32(void *p, mt_dtype t, size_t i, float v) {
    if (t == MT_F32) ((float *)p)[i] = v;
    else if (t == MT_BF16) ((uint16_t *)p)[i] = mt_f32_to_bf16(v);
    else ((uint16_t *)p)[i] = mt_f32_to_f16(v);
}

// Converts n elements between types (same type = memcpy). Not threaded.
// F16 -> BF16 goes through f32 (exact) and rounds once.
void mt_convert(void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);

#endif
