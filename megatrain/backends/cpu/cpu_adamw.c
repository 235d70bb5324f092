// cpu_adamw.c: the cpu backend's share of the optimizer. Its "device" memory is host
// memory, so the device AdamW and sum of squares are the host's own code (optim/): the
// split's engine path runs in CI with results that are the host's by construction.
#include "backends/cpu/cpu_internal.h"
#include "optim/grad_ops.h"

mt_status mt_cpu_op_adamw(mt_backend *be, const mt_adamw_state *s, mt_dtype pdt, const void *g, mt_dtype gdt,
                          size_t n, const mt_adamw_hparams *h, float wd, mt_stream_id st) {
    (void)be, (void)st; // synchronous: every stream is the calling thread
    MT_TRY(mt_cpu_check_wdt(pdt, "adamw"));
    MT_TRY(mt_cpu_check_wdt(gdt, "adamw"));
    mt_adamw_update_to(s, s, pdt, g, gdt, n, h, wd);
    return MT_OK;
}

mt_status mt_cpu_op_grad_add(mt_backend *be, void *dst, const void *src, mt_dtype t, size_t n, mt_stream_id st) {
    (void)be, (void)st;
    MT_TRY(mt_cpu_check_wdt(t, "grad_add"));
    mt_grad_accumulate(dst, src, t, n, 0);
    return MT_OK;
}

mt_status mt_cpu_op_grad_sumsq(mt_backend *be, double *out, const void *x, mt_dtype t, size_t n, mt_stream_id st) {
    (void)be, (void)st;
    MT_TRY(mt_cpu_check_wdt(t, "grad_sumsq"));
    *out = mt_grad_sumsq(x, t, n);
    return MT_OK;
}
