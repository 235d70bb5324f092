// grad_sumsq.c: the gradient drain's sum of squares (mt_grad_sumsq, what the engine's drain
// runs over each unit's landed gradients for the global norm) alone, on every core.
//   grad_sumsq/bf16/<n>   counters bytes_per_second (one read: 2 B/element) and gbps; n is 6x
//                         mt_mb_host_n(): 12 B per host_n element, 4x the last-level cache as
//                         the triad. calibrate_profile.py: host.grad_sumsq_gbps, the sim's price
//                         of the drain's pass (else the triad's rate, an assumption).
// The gradients are 0.5 each: every square and partial sum is exact, so the result is checked
// to the bit (counter "wrong").
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mb.h"
#include "optim/adamw.h"
#include "optim/grad_ops.h"

static void bm_grad_sumsq(mt_mb_state *s, const int64_t *args, const void *user) {
    (void)user;
    size_t n = (size_t)args[0];
    uint16_t *g = mt_mb_alloc(n * 2);
    if (!g) {
        mt_mb_error(s, "out of memory");
        return;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; i++) mt_store_f32(g, MT_BF16, (size_t)i, 0.5f);
    double sum = 0;
    while (mt_mb_keep_running(s)) sum = mt_grad_sumsq(g, MT_BF16, n);
    int wrong = sum != 0.25 * (double)n;
    if (wrong) mt_mb_error(s, "grad_sumsq: the sum of squares is not exact");
    double bytes = 2.0 * (double)n * (double)mt_mb_iterations(s);
    mt_mb_set_bytes_processed(s, bytes);
    mt_mb_counter(s, "gbps", bytes / 1e9, MT_MB_RATE);
    mt_mb_counter(s, "wrong", (double)wrong, 0);
    char label[64];
    snprintf(label, sizeof label, "%s, %d threads", mt_adamw_isa(), omp_get_max_threads());
    mt_mb_set_label(s, label);
    free(g);
}

void mt_mb_register_grad_sumsq(void) {
    const int64_t n = 6 * mt_mb_host_n();
    mt_mb_register("grad_sumsq/bf16", bm_grad_sumsq, NULL, &n, 1, MT_MB_REAL_TIME);
}
