// test_util.c: helpers shared by the C tests.
#include "test_util.h"

#include <math.h>

int mt_test_failures = 0, mt_test_checks = 0;

double mt_test_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    if (den == 0) return num;
    return num / den;
}

double mt_test_max_rel(const float *a, const float *b, size_t n, double floor) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + floor);
        if (r > worst || isnan(r)) worst = isnan(r) ? INFINITY : r;
    }
    return worst;
}

void mt_test_fill_uniform(float *x, size_t n, unsigned long long seed, float lo, float hi) {
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

int mt_test_finish(const char *name) {
    int failed = mt_test_failures;
    int passed = mt_test_checks - failed;
    if (mt_test_checks == 0) {
        fprintf(stderr, "%s: no checks ran\n", name);
        return 1;
    }
    fprintf(stderr, "%s: %d passed, %d failed\n", name, passed, failed);
    return failed ? 1 : 0;
}
