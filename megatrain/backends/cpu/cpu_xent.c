// cpu_xent.c: fused softmax cross-entropy forward and backward on a chunk of
// logits rows, in place (the engine runs the LM head chunk by chunk so the
// full (N,V) logits never exist).
#include <math.h>

#include "backends/cpu/cpu_internal.h"

// logits(n,V) in place -> dscale * (softmax - onehot(targets)); losses(n).
// Max-subtracted, so large logits do not overflow.
static void xent_fwd_bwd(float *logits, float *losses, const int32_t *targets, int n, int V, float dscale) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *x = logits + (size_t)i * V;
        int t = targets[i];
        float mx = -INFINITY;
        for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
        float xt = x[t];
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < V; j++) {
            float e = mt_cpu_expf(x[j] - mx);
            x[j] = e;
            s += e;
        }
        losses[i] = (float)(log(s) + mx - xt);
        float k = (float)(dscale / s);
        for (int j = 0; j < V; j++) x[j] *= k;
        x[t] -= dscale;
    }
}

mt_status mt_cpu_op_xent_fwd_bwd(mt_backend *be, void *logits, float *losses, const int32_t *targets, int n, int V,
                                 float dscale) {
    (void)be;
    if (n < 0 || V <= 0) return mt_fail(MT_ERR_SHAPE, "cpu xent_fwd_bwd: bad shape n=%d V=%d", n, V);
    for (int i = 0; i < n; i++)
        if (targets[i] < 0 || targets[i] >= V)
            return mt_fail(MT_ERR_ARG, "cpu xent_fwd_bwd: target %d at row %d is outside the vocab [0, %d)", targets[i],
                           i, V);
    xent_fwd_bwd(logits, losses, targets, n, V, dscale);
    return MT_OK;
}
