// rope_table.c: HF's default and llama3 inverse frequencies, then cos/sin.
#include "engine/rope_table.h"

#include <math.h>

void mt_rope_tables(const mt_config *c, int T, float *cos_out, float *sin_out) {
    const int half = c->head_dim / 2;
    for (int j = 0; j < half; j++) {
        float inv = (float)(1.0 / pow(c->rope_theta, (double)(2 * j) / c->head_dim));
        if (c->rope_llama3) {
            // transformers' _compute_llama3_parameters: keep high frequencies, divide low
            // frequencies by `factor`, interpolate smoothly in between.
            double old_len = c->rope_original_max_pos;
            double low_wavelen = old_len / c->rope_low_freq_factor;
            double high_wavelen = old_len / c->rope_high_freq_factor;
            double wavelen = 2 * M_PI / inv;
            double f = inv;
            if (wavelen > low_wavelen) f = inv / c->rope_factor;
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                double smooth = (old_len / wavelen - c->rope_low_freq_factor) /
                                (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1 - smooth) * inv / c->rope_factor + smooth * inv;
            }
            inv = (float)f;
        }
        for (int t = 0; t < T; t++) {
            float angle = (float)t * inv;
            cos_out[(size_t)t * half + j] = cosf(angle);
            sin_out[(size_t)t * half + j] = sinf(angle);
        }
    }
}
