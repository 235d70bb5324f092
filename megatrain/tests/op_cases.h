// op_cases.h: the shared op table (op_cases.c) and what its cases run with
// (test_backend_ops.c). Every case runs through the mt_backend_* wrappers on each
// registered backend that computes on data and supports() it, against a plain
// double-precision reference on the same (dtype-rounded) inputs, by normalized MSE
// with a per-output limit; bitwise where the backend says a path gives the same bits.
#ifndef MT_OP_CASES_H
#define MT_OP_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend_call.h"
#include "backend/backend_registry.h"

// A tensor on the backend under test: h = its values as f32 on the host (already
// rounded to t: what the reference reads), d = the backend's copy in dtype t.
typedef struct {
    float *h;
    void *d;
    size_t n;
    mt_dtype t;
} oc_t;

typedef struct oc_row oc_row;

// What one case runs with.
typedef struct {
    const mt_backend_entry *entry;
    mt_backend *be;
    mt_dtype act, wdt; // activations (be->act_dtype) and this run's weight type
    mt_attn_impl impl; // the attention implementation chosen (AUTO: the backend has one)
    const char *variant; // an environment setting of the backend's (NULL: its defaults)
    int perf, reps;    // --perf: time each case's main call (median of reps), check nothing
    int verbose, emulated, deliberate_errors;
    mt_op_shape s;     // the row's shape with act and wdt filled in
    char cfg[128];     // "cuda act=bf16 w=f32 native" for messages
} oc_ctx;

typedef void (*oc_fn)(oc_ctx *c, const oc_row *r);

// One row of the table: a family of checks (its function holds the double reference
// and its outputs' limits) on one shape.
struct oc_row {
    const char *family;
    oc_fn run;
    mt_op op;        // the op supports() is asked about first (a family asks about the others it calls)
    mt_op_shape s;   // dims; act, wdt and flags are filled per run
    int p[3];        // family extras (chunk rows, pointer offset, id pattern, ...)
    unsigned wdts;   // OC_W_*: weight types it runs with (0: the op takes no weights)
    unsigned flags;  // OC_*
    const char *why; // what this shape exercises
};

enum { OC_W_F32 = 1, OC_W_BF16 = 2, OC_W_BOTH = 3 };
enum {
    OC_FRESH = 1,     // runs on a backend just created (its scratch still empty)
    OC_HEAVY = 2,     // seconds of double reference: left out under emulation (MT_EMULATED)
    OC_ACT_F32 = 4,   // f32 activations only (the reference samples rows at f32 precision)
};

extern const oc_row mt_op_cases[];
extern const int mt_op_case_count;

// ---- what the families use (test_backend_ops.c) ----
oc_t oc_new(oc_ctx *c, size_t n, mt_dtype t, float lo, float hi); // random in [lo,hi), rounded to t
oc_t oc_rand(oc_ctx *c, size_t n, mt_dtype t);                      // in [-1, 1)
oc_t oc_from(oc_ctx *c, const float *h, size_t n, mt_dtype t);      // these values (rounded to t)
void oc_upload(oc_ctx *c, oc_t *x);                                 // x->h (rounded to t) to the backend
float *oc_download(oc_ctx *c, const oc_t *x);                       // the backend's values as f32 (caller frees)
void oc_free(oc_ctx *c, oc_t *x);
void *oc_at(const oc_t *x, size_t elems);                           // device pointer elems into x
int32_t *oc_ids(oc_ctx *c, const int32_t *h, size_t n);             // token ids on the backend
void oc_ids_free(oc_ctx *c, int32_t *d);
void oc_sync(oc_ctx *c);
// The call went through (a failure is a failed check naming the call).
int oc_ok(oc_ctx *c, mt_status s, const char *call);
// Checks: x's backend values against ref by normalized MSE (and all finite); two tensors'
// bytes equal; a condition.
void oc_close(oc_ctx *c, const char *what, const oc_t *x, const double *ref, double tol);
void oc_same(oc_ctx *c, const char *what, const oc_t *a, const oc_t *b);
void oc_expect(oc_ctx *c, int cond, const char *what);
// Whether the backend takes op on this row's shape with extra flags (MT_SHAPE_*).
int oc_supports(oc_ctx *c, mt_op op, unsigned flags);
// Limits by what an output is stored as: tight where every input and the output are f32,
// loose where bf16 rounding enters. rule: which dtypes count.
enum { OC_BY_ACT, OC_BY_W, OC_BY_ANY };
double oc_tol(const oc_ctx *c, int rule, double tight, double loose);
// Times `call` (--perf: reps runs after one warm-up, the median) or runs it once.
double oc_now_s(void);
void oc_perf_report(oc_ctx *c, const char *what, const double *ms, int n, double flops);

#define OC_RUN(c, what, flops, call)                                                         \
    do {                                                                                     \
        if (!(c)->perf) {                                                                    \
            oc_ok((c), (call), what);                                                        \
            break;                                                                           \
        }                                                                                    \
        double ms_[64];                                                                      \
        int n_ = (c)->reps < 64 ? (c)->reps : 64;                                            \
        if (!oc_ok((c), (call), what)) break;                                                \
        oc_sync(c);                                                                          \
        for (int r_ = 0; r_ < n_; r_++) {                                                    \
            double t0_ = oc_now_s();                                                         \
            oc_ok((c), (call), what);                                                        \
            oc_sync(c);                                                                      \
            ms_[r_] = (oc_now_s() - t0_) * 1e3;                                              \
        }                                                                                    \
        oc_perf_report((c), what, ms_, n_, (flops));                                         \
    } while (0)

#endif
