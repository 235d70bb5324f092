// util.c: helpers shared by the benchmark files (median, aligned touched buffers).
#include <omp.h>
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
