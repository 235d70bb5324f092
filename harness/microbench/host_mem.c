// host_mem.c: host memory bandwidth. Decimal GB/s in the counters' names.
//   memcpy/<bytes>   threaded memcpy; bytes_per_second counts bytes COPIED (the
//                    copy-engine convention, as H2D/D2H), memory traffic is 2x that.
//   triad/<n>        STREAM triad a[i] = b[i] + s*c[i] over n doubles; counts
//                    24 bytes per element (STREAM's convention, no write-allocate).
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mb.h"

static void label_threads(mt_mb_state *s) {
    char label[64];
    snprintf(label, sizeof label, "%d threads", omp_get_max_threads());
    mt_mb_set_label(s, label);
}

static void bm_memcpy(mt_mb_state *s, const int64_t *args, const void *user) {
    size_t bytes = (size_t)args[0];
    char *src = mt_mb_alloc(bytes), *dst = mt_mb_alloc(bytes);
    if (!src || !dst) {
        free(src), free(dst);
        mt_mb_error(s, "out of memory");
        return;
    }
    memset(src, 0x5a, bytes);
    while (mt_mb_keep_running(s)) {
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            size_t chunk = (bytes / (size_t)nt + 63) & ~(size_t)63;
            size_t lo = chunk * (size_t)t, hi = lo + chunk < bytes ? lo + chunk : bytes;
            if (lo < hi) memcpy(dst + lo, src + lo, hi - lo);
        }
    }
    long wrong = 0;
    for (size_t i = 0; i < bytes; i += 4093) wrong += dst[i] != 0x5a;
    wrong += dst[bytes - 1] != 0x5a;
    if (wrong) mt_mb_error(s, "memcpy: data check failed");
    mt_mb_set_bytes_processed(s, (double)bytes * (double)mt_mb_iterations(s));
    mt_mb_counter(s, "wrong", (double)wrong, 0);
    label_threads(s);
    free(src), free(dst);
}

static void bm_triad(mt_mb_state *s, const int64_t *args, const void *user) {
    long n = (long)args[0];
    double *a = mt_mb_alloc(sizeof(double) * (size_t)n), *b = mt_mb_alloc(sizeof(double) * (size_t)n),
           *c = mt_mb_alloc(sizeof(double) * (size_t)n);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        mt_mb_error(s, "out of memory");
        return;
    }
    const double q = 3.0;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) b[i] = 1.0, c[i] = 2.0;
    while (mt_mb_keep_running(s)) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + q * c[i];
    }
    long wrong = 0;
    for (long i = 0; i < n; i += 4099) wrong += a[i] != 7.0;
    if (wrong) mt_mb_error(s, "triad: data check failed");
    mt_mb_set_bytes_processed(s, 24.0 * (double)n * (double)mt_mb_iterations(s));
    mt_mb_counter(s, "wrong", (double)wrong, 0);
    label_threads(s);
    free(a), free(b), free(c);
}

void mt_mb_register_host(void) {
    const int64_t sizes[] = {32ll << 20, 256ll << 20};
    for (int i = 0; i < 2; i++) mt_mb_register("memcpy", bm_memcpy, NULL, &sizes[i], 1, MT_MB_REAL_TIME);
    const int64_t n = mt_mb_host_n(); // 2^24 or more: beyond the last-level cache (util.c)
    mt_mb_register("triad", bm_triad, NULL, &n, 1, MT_MB_REAL_TIME);
}
