// optimizer_worker.h: the host AdamW pass, run by a worker thread unit by unit
// in forward order (embedding, layer 0 .. L-1, head) so that the next step's
// prefetch of unit u only waits for u's update, not for the whole optimizer.
// Each unit's update is independent, so the result equals a serial step.
#ifndef MT_OPTIMIZER_WORKER_H
#define MT_OPTIMIZER_WORKER_H

#include "engine/host_state.h"
#include "engine/parts.h"
#include "engine/trace.h"
#include "optim/adamw.h"

typedef struct mt_opt_worker mt_opt_worker;

// The worker's own memory: none today (it updates the host state in place);
// a speculative step that keeps copies to roll back would count them here.
mt_part_bytes mt_opt_worker_bytes(const mt_engine_shape *sh);
mt_status mt_opt_worker_create(mt_model *m, mt_opt_worker **out);
void mt_opt_worker_destroy(mt_opt_worker *w);
// Starts one update of every unit with these hyper-parameters (returns at once).
void mt_opt_worker_start(mt_opt_worker *w, const mt_adamw_hparams *h, float weight_decay);
// Blocks until unit `u` has received every started update; returns ms waited.
double mt_opt_worker_wait_unit(mt_opt_worker *w, int u);
double mt_opt_worker_wait_all(mt_opt_worker *w);
// Records each unit's update as a host span in `t`.
void mt_opt_worker_set_trace(mt_opt_worker *w, mt_trace *t);
// Applies one update to one unit on the calling thread (shared with the worker).
void mt_opt_update_unit(mt_model *m, mt_unit *u, const mt_adamw_hparams *h, float weight_decay);

#endif
