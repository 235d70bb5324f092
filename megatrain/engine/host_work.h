// host_work.h: the one seam for the engine's host-side work (gradient adds, AdamW, losses, allocation,
// the clock): real where the backend computes (host_work_real.c), priced on a virtual clock where it
// simulates (host_work_priced.c). Chosen once from the backend's capabilities; nothing else asks which.
#ifndef MT_HOST_WORK_H
#define MT_HOST_WORK_H

#include <stdint.h>

#include "backend/backend_call.h"
#include "optim/adamw.h"

typedef struct mt_host_work mt_host_work;
struct mt_model; // host_state.h
struct mt_unit;

struct mt_host_work {
    const char *name; // "real" or "priced"
    mt_backend *be;
    // n elements of `wire` in `slab` into `grad` (n elements of `wdt`): converted
    // (exactly: the values were wdt on the device), copied on the first micro-batch,
    // added after. With `last`, returns the sum of squares of the accumulated grad.
    // slab == grad: the values are already in place (a direct copy): nothing to add.
    double (*accumulate)(const mt_host_work *h, void *grad, mt_dtype wdt, void *slab, mt_dtype wire, size_t n,
                         int first, int last);
    // One fused AdamW pass over every tensor of unit u (weight decay only on
    // tensors with ndim >= 2, as torch param groups do): reads u's state, writes
    // `out` (a spare set laid out as u's blocks: the speculative step), or u's
    // own state where out is NULL.
    void (*adamw)(const mt_host_work *h, const struct mt_model *m, struct mt_unit *u, const mt_adamw_state *out,
                  const mt_adamw_hparams *hp, float weight_decay);
    // In place, the ranges `r` (sorted, disjoint) of unit u's elements (its tensors laid end
    // to end, each with its own decay): each element bitwise what adamw gives it. A part of a
    // unit's update (one range), or the embedding's rows (one range per run of rows).
    void (*adamw_ranges)(const mt_host_work *h, const struct mt_model *m, struct mt_unit *u, const mt_elem_range *r,
                         size_t nr, const mt_adamw_hparams *hp, float weight_decay);
    // n rows of row_elems weights (wdt) of `src`, rows[i] to dst's i-th, back to back.
    void (*gather_rows)(const mt_host_work *h, void *dst, const void *src, mt_dtype wdt, size_t row_elems,
                        const int32_t *rows, size_t n);
    // The mean of n per-token losses (NaN where no data exists).
    double (*mean_loss)(const mt_host_work *h, const float *losses, size_t n);
    // A host block of the model state: page-locked through the backend or
    // pageable; zeroed where data exists.
    mt_status (*alloc)(const mt_host_work *h, size_t bytes, int pinned, void **out);
    void (*free)(const mt_host_work *h, void *p, size_t bytes, int pinned);
    // The engine's clock in ms (wall, or this thread's virtual time) ...
    double (*now_ms)(const mt_host_work *h);
    // ... the time every thread's clock has surely reached (the wall clock now; none,
    // -INFINITY, under virtual time, where each thread keeps its own) ...
    double (*shared_now_ms)(const mt_host_work *h);
    // Host time a peer's framework spends between device calls (its Python hooks,
    // engine/peer.h): the priced seam advances the thread's clock by ms, the real one
    // spins the wall clock (peers run only where time is virtual; the CLI refuses others).
    void (*spend)(const mt_host_work *h, double ms);
    // ... and this thread has waited for something that finished at t_ms on that
    // clock (virtual time catches up; wall time already has).
    void (*waited_until)(const mt_host_work *h, double t_ms);
};

// The seam for `be`: priced when its time is virtual (MT_CAP_VIRTUAL_TIME, which
// promises a host_work_ms entry), else real.
mt_host_work mt_host_work_for(mt_backend *be);
mt_host_work mt_host_work_real(mt_backend *be);
mt_host_work mt_host_work_priced(mt_backend *be);

#endif
