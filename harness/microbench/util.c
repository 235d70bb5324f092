// util.c: helpers shared by the benchmark files (median, aligned touched buffers).
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mb.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mt_mb_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void *mt_mb_alloc(size_t bytes) {
    size_t cap = (bytes + 63) & ~(size_t)63;
    char *p = aligned_alloc(64, cap ? cap : 64);
    if (!p) return NULL;
    // First touch in parallel with a static split, as the kernels read it, so pages
    // land on the NUMA node of the thread that will use them.
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)(cap / 4096 + 1); i++) {
        size_t off = (size_t)i * 4096;
        if (off < cap) memset(p + off, 0, cap - off < 4096 ? cap - off : 4096);
    }
    return p;
}

int64_t mt_mb_host_n(void) {
    const char *e = getenv("MT_MB_HOST_N");
    if (!e || !*e) return 1ll << 24;
    char *end;
    errno = 0;
    long long n = strtoll(e, &end, 10);
    if (errno || *end || n < 1024 || n > (1ll << 31)) {
        fprintf(stderr, "mt-microbench: MT_MB_HOST_N=%s: not a whole number of elements in [1024, 2^31]\n", e);
        exit(2); // a malformed environment, like a malformed command line
    }
    return n;
}
