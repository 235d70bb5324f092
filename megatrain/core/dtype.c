// dtype.c: bulk dtype conversion.
#include "core/dtype.h"

// _Float16: GCC >= 12 and Clang, on x86-64 (SSE2) and aarch64.
float mt_f16_to_f32(uint16_t h) {
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

uint16_t mt_f32_to_f16(float f) {
    _Float16 x = (_Float16)f;
    uint16_t h;
    memcpy(&h, &x, 2);
    return h;
}

void mt_convert(void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    if (dt == st) {
        memmove(dst, src, n * mt_dtype_size(dt));
    } else if (dt == MT_F32 && st == MT_BF16) {
        const uint16_t *s = src;
        float *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = mt_bf16_to_f32(s[i]);
    } else if (dt == MT_BF16 && st == MT_F32) {
        const float *s = src;
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = mt_f32_to_bf16(s[i]);
    } else { // F16 on either side: element by element through f32
        for (size_t i = 0; i < n; i++) mt_store_f32(dst, dt, i, mt_load_f32(src, st, i));
    }
}
