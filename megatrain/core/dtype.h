// dtype.h: element types of stored tensors and the bf16 <-> f32 conversions.
// bf16 is stored as uint16_t; rounding is round-to-nearest-even (as torch).
#ifndef MT_DTYPE_H
#define MT_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum { MT_F32 = 0, MT_BF16 = 1 } mt_dtype;

static inline size_t mt_dtype_size(mt_dtype t) { return t == MT_F32 ? 4 : 2; }
static inline const char *mt_dtype_name(mt_dtype t) { return t == MT_F32 ? "F32" : "BF16"; }

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

// Loads element i of a buffer of type t as f32 (for non-hot paths and tests).
static inline float mt_load_f32(const void *p, mt_dtype t, size_t i) {
    return t == MT_F32 ? ((const float *)p)[i] : mt_bf16_to_f32(((const uint16_t *)p)[i]);
}
static inline void mt_store_f32(void *p, mt_dtype t, size_t i, float v) {
    if (t == MT_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = mt_f32_to_bf16(v);
}

// Converts n elements between types (same type = memcpy). Not threaded.
void mt_convert(void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n);

#endif
