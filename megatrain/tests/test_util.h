// test_util.h: tiny test helpers. A failed CHECK prints file:line, the
// expression and a hint, and the test exits 1 at the end (never "not ok" + 0).
#ifndef MT_TEST_UTIL_H
#define MT_TEST_UTIL_H

#include <stddef.h>
#include <stdio.h>

extern int mt_test_failures, mt_test_checks;

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        mt_test_checks++;                                                          \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            mt_test_failures++;                                                    \
        }                                                                          \
    } while (0)

// Normalized mean squared error sum((a-b)^2) / sum(b^2) (0 when both are zero).
double mt_test_nmse(const float *a, const float *b, size_t n);
// Max |a-b| / (|b| + floor).
double mt_test_max_rel(const float *a, const float *b, size_t n, double floor);
// Fills x with deterministic uniform values in [lo, hi).
void mt_test_fill_uniform(float *x, size_t n, unsigned long long seed, float lo, float hi);
// Prints "N passed, M failed" and returns the process exit code.
int mt_test_finish(const char *name);

#endif
