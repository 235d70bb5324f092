// sim_adamw.c: the device's share of the optimizer, priced: both kernels are
// memory-bound passes over the state, at the profile's HBM rate (mt_sim_hbm_ms), on
// the stream the engine gives them (the split's own stream overlaps the compute).
#include "backends/sim/sim_internal.h"

static mt_status price_on(mt_backend *be, mt_stream_id st, const char *name, double bytes) {
    mt_sim_ctx *c = mt_sim_ctx_of(be);
    pthread_mutex_lock(&c->mu);
    mt_sim_enqueue_locked(c, st, name, mt_sim_hbm_ms(&c->prof, bytes), bytes, MT_SIM_BYTES);
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

// Bytes of one AdamW element: read g, p (or master) and m, v; write p, m, v (and master).
double mt_sim_adamw_bytes_per_elem(mt_dtype pdt, mt_dtype gdt, int master) {
    double ps = (double)mt_dtype_size(pdt), gs = (double)mt_dtype_size(gdt);
    return gs + 16.0 + (master ? 8.0 + ps : 2.0 * ps);
}

mt_status mt_sim_op_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                          size_t n, const mt_adamw_hparams *h, float wd, mt_stream_id st) {
    (void)g, (void)h, (void)wd;
    return price_on(be, st, "adamw", (double)n * mt_sim_adamw_bytes_per_elem(pdt, gdt, s->master != NULL));
}

mt_status mt_sim_op_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st) {
    (void)dst, (void)src;
    return price_on(be, st, "grad_add", 3.0 * (double)n * (double)mt_dtype_size(t)); // read both, write one
}

mt_status mt_sim_op_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st) {
    (void)out, (void)x;
    return price_on(be, st, "grad_sumsq", (double)n * (double)mt_dtype_size(t));
}
