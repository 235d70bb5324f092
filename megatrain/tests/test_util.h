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
// Prints "N passed, M failed", removes the scratch directory and returns the
// process exit code.
int mt_test_finish(const char *name);

// ---- files: the writers and mt_test_tmpdir_make exit 1 with a message when they fail ----
// A fresh directory $TMPDIR/PREFIX_XXXXXX (/tmp without TMPDIR) in dir[cap]; 0 on failure.
int mt_test_mkdtemp(char *dir, size_t cap, const char *prefix);
// rm -rf dir (a warning on stderr when that fails).
void mt_test_rmtree(const char *dir);
// Makes the test's scratch directory (removed by mt_test_finish) and returns it.
const char *mt_test_tmpdir_make(const char *prefix);
const char *mt_test_tmpdir(void);
// The scratch directory's `name`; eight rotating buffers, so a path lives for seven more calls.
const char *mt_test_path(const char *name);
// Writes n bytes (a string) to path and returns path.
const char *mt_test_write_bytes(const char *path, const void *data, size_t n);
const char *mt_test_write_text(const char *path, const char *text);
// Writes text to the scratch directory's `name`; returns its path (mt_test_path).
const char *mt_test_write_tmp(const char *name, const char *text);
// The whole file, NUL-terminated (caller frees); NULL when it cannot be read.
char *mt_test_read_text(const char *path);

// ---- model state ----
struct mt_model;
// A copy of every unit's parameters, m, v and f32 master (what AdamW writes), in unit
// order (caller frees); *bytes its size. Two runs' copies compare bitwise with memcmp.
unsigned char *mt_test_state_snapshot(const struct mt_model *m, size_t *bytes);

// ---- the speculative step's race, made sure ----
// Whether a unit is speculated depends on the optimizer worker starting it before
// the backward ends: a race on the wall clock that a loaded machine can lose on
// every step. A test that checks something was speculated wraps m's AdamW seam
// (counting out-of-place passes), marks each step's start, and has a late drain
// (layer 0's, when the last layers are final) wait for the step's first pass.
void mt_test_spec_probe(struct mt_model *m);
void mt_test_spec_step(void);
// Half a second at most, far beyond a scheduler's latency: on a step whose running
// norm passes the clip before any unit is final nothing is eligible to wait for.
void mt_test_spec_wait(void);

#endif
