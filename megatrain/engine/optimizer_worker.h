// optimizer_worker.h: the host AdamW pass on a worker thread, unit by unit in forward order, so the
// next step's prefetch of unit u waits only for u's update (units are independent: equal to a serial step).
// Speculative step: a unit whose gradients are final is updated under the backward with clip scale 1
// into spare blocks, kept by a swap when the norm confirms scale 1, else redone: bitwise the plain step.
// Spares cover a window of units (parts.h: spec_window), never the head, which is needed last.
#ifndef MT_OPTIMIZER_WORKER_H
#define MT_OPTIMIZER_WORKER_H

#include "engine/host_state.h"
#include "engine/parts.h"
#include "engine/trace.h"
#include "optim/adamw.h"

typedef struct mt_opt_worker mt_opt_worker;

// Bytes of one unit's spare blocks: what AdamW writes (a param block in the
// weights' dtype; an optim block with m, v and the f32 master in mixed precision).
size_t mt_opt_spare_bytes(const mt_unit_layout *lay, mt_precision p);
// The worker's own memory: the spare blocks of the speculative window's units
// (the param blocks pinned where the state's are), nothing without speculation.
mt_part_bytes mt_opt_worker_bytes(const mt_engine_shape *sh);
// Of which the embedding's rows first (sh->rows_cap): the stage and its tables.
size_t mt_opt_worker_rows_bytes(const mt_engine_shape *sh);
// `window`: units with spare blocks (sh->spec_window; 0: never speculates); `rows_cap`:
// the embedding rows a pass may update first and stage (sh->rows_cap; 0: never).
// `parts`: a unit updated in place after the norm is updated in that many parts
// (mt_update_part), each published as done (sh->s.update_parts; 0 or 1: whole).
mt_status mt_opt_worker_create(mt_model *m, int window, size_t rows_cap, int parts, mt_opt_worker **out);
void mt_opt_worker_destroy(mt_opt_worker *w);
// Opens speculation for the step about to run: units whose gradients become
// final are updated with `h` (grad_scale 1) while the running norm stays finite
// and, with clip > 0, below clip (past it the step will clip: no point).
void mt_opt_worker_speculate(mt_opt_worker *w, const mt_adamw_hparams *h, float weight_decay, float clip);
// Called on the drain thread: unit u's gradients are final, with their sum of squares.
void mt_opt_worker_grad_final(mt_opt_worker *w, int u, double sumsq);
// The step's norm is known: the final hyper-parameters (with `skip` no unit
// changes: the non-finite policy). Settles what was speculated: units updated
// with other hyper-parameters (or under a skip) will be rolled back.
// *spec_units: units speculated this step; *rollbacks: of those, the ones that
// will be dropped and redone (either may be NULL).
void mt_opt_worker_settle(mt_opt_worker *w, const mt_adamw_hparams *h, float weight_decay, int skip, int *spec_units,
                          int *rollbacks);
// Starts the settled step's update of every unit, in forward order (returns at once).
void mt_opt_worker_start(mt_opt_worker *w);
// Blocks until unit `u` has received every started update; returns ms waited.
double mt_opt_worker_wait_unit(mt_opt_worker *w, int u);
double mt_opt_worker_wait_all(mt_opt_worker *w);
// The optimizer state sharded over H hosts (host_shard.h): each pass updates host h's slice
// of every unit only (whole, no rows first, no parts), then calls publish (NULL: none) before
// the unit is done, so the next forward waits for the hosts' gather as for the update.
// Before the first pass.
void mt_opt_worker_set_slice(mt_opt_worker *w, int H, int h, mt_status (*publish)(void *ctx, int u), void *ctx);
// A publish that failed (the run cannot go on), as a status; with `wait`, after the started pass.
mt_status mt_opt_worker_status(mt_opt_worker *w, int wait);
// The embedding's rows first. The engine gives the rows the next forward will read
// (sorted, unique; before mt_opt_worker_start); the pass then updates them first and
// stages their weights back to back, so that forward waits for them and a copy of
// them only, and updates every other row last, under the forward. The result is the
// whole update's, bitwise. More rows than rows_cap, or none given: the plain pass.
void mt_opt_worker_rows_next(mt_opt_worker *w, const int32_t *rows, size_t n);
typedef struct {
    const int32_t *slot; // per vocabulary row: its place in the stage, -1 if not staged
    const void *stage;   // n_rows rows of weights, back to back
    size_t n_rows;
} mt_staged_rows;
// Blocks until the started pass has staged its rows and the `need` rows (sorted,
// unique) are among them (returns 1, *out set), or else until the whole embedding is
// updated (returns 0). *waited_ms: time waited on the engine's clock.
int mt_opt_worker_wait_rows(mt_opt_worker *w, const int32_t *need, size_t n, mt_staged_rows *out, double *waited_ms);
// Waits until the started pass has begun (its kept units published, a swap each: they
// come first) and says whether unit u's update is done already.
int mt_opt_worker_published(mt_opt_worker *w, int u);
// The parts a unit's update is published in (1: whole), and a wait for part p of unit u:
// returns once that part of the started update is done (or the whole unit); ms waited.
int mt_opt_worker_parts(const mt_opt_worker *w);
double mt_opt_worker_wait_part(mt_opt_worker *w, int u, int p);
// Records each unit's update as a host span in `t`.
void mt_opt_worker_set_trace(mt_opt_worker *w, mt_trace *t);
// Units the device updates (device_optimizer.h; on[u] != 0; NULL: none): the passes leave
// them alone and publish them at once (the device's stream orders their loads), and they
// are never speculated. Before the first step; `on` outlives the worker's passes.
void mt_opt_worker_set_device_units(mt_opt_worker *w, const unsigned char *on);
// Applies one update to one unit on the calling thread (shared with the worker).
void mt_opt_update_unit(mt_model *m, mt_unit *u, const mt_adamw_hparams *h, float weight_decay);

#endif
