// dtype.c: bulk dtype conversion.
#include "core/dtype.h"

void mt_convert(void *dst, mt_dtype dt, const void *src, mt_dtype st, size_t n) {
    if (dt == st) {
        memmove(dst, src, n * mt_dtype_size(dt));
    } else if (dt == MT_F32) {
        const uint16_t *s = src;
        float *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = mt_bf16_to_f32(s[i]);
    } else {
        const float *s = src;
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = mt_f32_to_bf16(s[i]);
    }
}
