// cpu_rope.c: HF rotate-half rotary embedding on the q and k heads of packed
// qkv rows. Position = index within the sequence; llama3 scaling and the base
// live in the cos/sin tables the caller builds.
#include "backends/cpu/cpu_internal.h"

// out, inp (B,T,QKV*HD), QKV = NH+2*NKV; cos, sin (T, HD/2). sign = +1 rotates
// by +theta (forward); sign = -1 by -theta, the transpose (backward). For
// j < half:  o[j] = x[j] c - x[j+half] s,  o[j+half] = x[j+half] c + x[j] s.
// Each pair is read before it is written, so out == inp is fine.
static void rope(float *out, const float *inp, const float *cos, const float *sin, int B, int T, int NH, int NKV,
                 int HD, float sign) {
    int QKV = NH + 2 * NKV, NQK = NH + NKV, half = HD / 2;
    size_t rs = (size_t)QKV * HD;
#pragma omp parallel for schedule(static)
    for (long long bt = 0; bt < (long long)B * T; bt++) {
        int t = (int)(bt % T);
        const float *c = cos + (size_t)t * half, *s = sin + (size_t)t * half;
        const float *x = inp + bt * rs;
        float *o = out + bt * rs;
        for (int h = 0; h < NQK; h++) {
            const float *xh = x + (size_t)h * HD;
            float *oh = o + (size_t)h * HD;
            for (int j = 0; j < half; j++) {
                float x1 = xh[j], x2 = xh[j + half], sj = sign * s[j];
                oh[j] = x1 * c[j] - x2 * sj;
                oh[j + half] = x2 * c[j] + x1 * sj;
            }
        }
        if (o != x)
            for (size_t i = (size_t)NQK * HD; i < rs; i++) o[i] = x[i];
    }
}

static mt_status rope_check(const char *op, int B, int T, int NH, int NKV, int HD) {
    if (B < 0 || T < 0 || NH <= 0 || NKV <= 0 || HD <= 0 || HD % 2)
        return mt_fail(MT_ERR_SHAPE, "cpu %s: bad shape B=%d T=%d NH=%d NKV=%d HD=%d (HD must be even)", op, B, T, NH,
                       NKV, HD);
    return MT_OK;
}

mt_status mt_cpu_op_rope_fwd(mt_backend *be, void *out, const void *inp, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD) {
    (void)be;
    MT_TRY(rope_check("rope_fwd", B, T, NH, NKV, HD));
    rope(out, inp, cos, sin, B, T, NH, NKV, HD, 1.0f);
    return MT_OK;
}

mt_status mt_cpu_op_rope_bwd(mt_backend *be, void *dinp, const void *dout, const float *cos, const float *sin, int B,
                             int T, int NH, int NKV, int HD) {
    (void)be;
    MT_TRY(rope_check("rope_bwd", B, T, NH, NKV, HD));
    rope(dinp, dout, cos, sin, B, T, NH, NKV, HD, -1.0f);
    return MT_OK;
}
