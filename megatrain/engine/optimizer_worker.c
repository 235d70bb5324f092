// optimizer_worker.c: generation counters per unit, one worker thread; the
// speculative step's queue of final units and their spare state blocks.
#include "engine/optimizer_worker.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/vclock.h"
#include "engine/host_shard.h"

struct mt_opt_worker {
    mt_model *m;
    mt_adamw_hparams h;
    float wd;
    int skip;       // the started update is a skipped step: no unit changes
    int rollback;   // and its speculated units' spare results are dropped (and redone in place)
    int started;    // updates started
    int *done;      // per unit: updates applied
    double *done_t; // per unit: when its last update finished (the engine clock)
    double start_t; // when the running update was started
    int stop;
    mt_trace *trace;
    // ---- speculation
    int window;       // units n-1-window .. n-2 have spare blocks (layers from the last down, the embedding)
    void **spare_param, **spare_optim; // per unit (NULL outside the window): a param and an optim block
    int spec_open;    // the coming step may speculate
    mt_adamw_hparams hs; // its hyper-parameters (grad_scale 1)
    float wd_s, clip;
    double partial;   // running sum of squares of the final units, in arrival order
    int *queue;       // final units waiting to be speculated, in arrival order (a ring of n_units)
    double *queue_t;  // when each became final
    double *queue_sq; // the running sum of squares then
    int settling;     // steps whose norm is known (speculation to settle)
    int resolved;     // of those, settled
    int resolved_spec;// the units speculated in the last one
    int q_head, q_len;
    int *spec;        // per unit: updated speculatively since the last start
    // ---- the embedding's rows the next forward reads, first (rows_cap 0: never)
    size_t rows_cap;          // at most this many rows are staged; more: the whole table crosses
    int32_t *next_rows;       // the coming pass's rows (sorted, unique), n_next of them (0: none given)
    size_t n_next;
    int32_t *staged;          // the rows the last rows-first pass staged, in stage order
    size_t n_staged;
    int32_t *slot;            // per vocabulary row: its place in the stage, or -1
    void *stage;              // the staged rows' weights, back to back (pinned: they cross the link)
    size_t stage_bytes;
    mt_elem_range *ranges;    // scratch: the rows, or every other row, as element ranges
    // ---- a unit's update in parts (update_parts; 0: whole), each published as it is done
    int parts;
    int slice_H, slice_h;     // optimizer state sharded over slice_H > 1 hosts: this one updates slice slice_h only
    mt_status (*publish)(void *ctx, int u); // then, before u is done: every host's slice to every host (NULL: none)
    void *publish_ctx;
    mt_status publish_status; // the first failed publish (the run ends: mt_opt_worker_status)
    char publish_error[1024];
    int *part_gen;            // per unit: the pass its parts are of
    int *parts_done;          // per unit: parts done in that pass
    double *part_t;           // per unit and part: when it was done
    int begun;                // the last pass that has begun: its kept units are published
    int *kept_gen;            // per unit: the last pass that kept its speculative update
    double begun_t;
    int rows_gen;             // the pass whose rows are staged (and updated)
    double rows_t;            // when they were
    const unsigned char *on_device; // per unit: updated by the device (device_optimizer.h), never here; NULL: none
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int lane; // its host lane (core/vclock.h): the sim's copies wait for its final pass
    int thread_started;
};

size_t mt_opt_spare_bytes(const mt_unit_layout *lay, mt_precision p) {
    return mt_unit_weights_bytes(lay, p) + mt_unit_optim_bytes(lay, p);
}

// The stage of the next forward's embedding rows: rows_cap rows of the table (0 without rows first).
static size_t rows_stage_bytes(const mt_engine_shape *sh) {
    return sh->rows_cap * (size_t)sh->c.hidden_size * sh->wdt_elem_bytes;
}

// The window: units counted from the last layer down, as their gradients become final;
// never the head (optimizer_worker.h says why). The spare param blocks are pinned as
// the unit's own are: a kept update streams from them.
mt_part_bytes mt_opt_worker_bytes(const mt_engine_shape *sh) {
    mt_part_bytes b = {0};
    int n = sh->L + 2;
    for (int k = 0; k < sh->spec_window && k < n - 1; k++) {
        int u = n - 2 - k;
        const mt_unit_layout *lay = u == 0 ? &sh->lay_embed : &sh->lay_layer;
        b.host += mt_opt_spare_bytes(lay, sh->prec);
        b.pinned += sh->s.host_pinned ? mt_unit_weights_bytes(lay, sh->prec) : 0;
    }
    b.host += mt_opt_worker_rows_bytes(sh);
    b.pinned += sh->s.host_pinned ? rows_stage_bytes(sh) : 0;
    return b;
}

// The staged rows' weights (pinned where the state is), the per-row slot map, the row
// lists and the range scratch.
size_t mt_opt_worker_rows_bytes(const mt_engine_shape *sh) {
    if (!sh->rows_cap) return 0;
    return rows_stage_bytes(sh) + (size_t)sh->c.vocab_size * 4 + 2 * sh->rows_cap * 4 +
           (sh->rows_cap + 1) * sizeof(mt_elem_range);
}

void mt_opt_update_unit(mt_model *m, mt_unit *u, const mt_adamw_hparams *h, float weight_decay) {
    m->host.adamw(&m->host, m, u, NULL, h, weight_decay);
}

// Keeps a speculative update: the unit's blocks and its spares change places,
// so what was written out of place is the state, and the old state the spare.
static void keep_spare(mt_opt_worker *w, int unit) {
    mt_unit *u = &w->m->units[unit];
    void *param = u->param_block, *optim = u->optim_block;
    u->param_block = w->spare_param[unit], u->optim_block = w->spare_optim[unit];
    w->spare_param[unit] = param, w->spare_optim[unit] = optim;
    mt_unit_bind(u, w->m->prec);
}

static void traced(mt_opt_worker *w, const char *what, int unit, double t0) {
    if (w->trace)
        mt_trace_host(w->trace, MT_LANE_OPTIMIZER, what, w->m->units[unit].layer, t0, mt_trace_host_now(w->trace));
}

static double now(mt_opt_worker *w) { return w->trace ? mt_trace_host_now(w->trace) : 0; }

// One speculative update, with scale 1, out of place into the unit's spare blocks:
// the unit's own state stays as it was until the update is kept.
static void speculate_unit(mt_opt_worker *w, int unit, const mt_adamw_hparams *h, float wd) {
    double t0 = now(w);
    mt_unit *u = &w->m->units[unit];
    mt_adamw_state out = mt_unit_state_in(u->lay, w->m->prec, w->spare_param[unit], w->spare_optim[unit]);
    w->m->host.adamw(&w->m->host, w->m, u, &out, h, wd);
    traced(w, "adamw (speculative)", unit, t0);
}

static void mark_done(mt_opt_worker *w, int u, int gen) {
    pthread_mutex_lock(&w->mu);
    w->spec[u] = 0;
    w->done[u] = gen;
    w->done_t[u] = w->m->host.now_ms(&w->m->host);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

// Rows as ranges of the embedding unit's elements (the table at `base`), neighbours merged;
// with `others`, every row not in them.
static size_t row_ranges(const int32_t *rows, size_t n, int others, size_t V, size_t C, size_t base,
                         mt_elem_range *out) {
    size_t k = 0, prev = 0; // prev: the row after the last one taken
    for (size_t i = 0; i <= n; i++) {
        size_t r = i < n ? (size_t)rows[i] : V;
        if (others) {
            if (r > prev) out[k++] = (mt_elem_range){base + prev * C, base + r * C};
        } else if (i < n) {
            if (k && out[k - 1].hi == base + r * C) out[k - 1].hi += C;
            else out[k++] = (mt_elem_range){base + r * C, base + (r + 1) * C};
        }
        prev = r + 1;
    }
    return k;
}

// The embedding's rows the next forward reads: updated, then staged back to back for the
// link (weight_ring.c sends only them); every other row is updated at the end of the pass,
// under the forward. Each element's update is that of the whole pass, bitwise (adamw.h).
static void rows_first(mt_opt_worker *w, int gen, size_t n_rows, const mt_adamw_hparams *h, float wd) {
    mt_unit *u = &w->m->units[0];
    size_t C = (size_t)w->m->cfg.hidden_size, V = (size_t)w->m->cfg.vocab_size;
    const mt_tensor_slot *v = &u->lay->t[MT_T_EMBED];
    double t0 = now(w);
    size_t nr = row_ranges(w->next_rows, n_rows, 0, V, C, v->offset, w->ranges);
    w->m->host.adamw_ranges(&w->m->host, w->m, u, w->ranges, nr, h, wd);
    traced(w, "adamw (embedding rows)", 0, t0);
    for (size_t i = 0; i < w->n_staged; i++) w->slot[w->staged[i]] = -1;
    for (size_t i = 0; i < n_rows; i++) w->slot[w->next_rows[i]] = (int32_t)i, w->staged[i] = w->next_rows[i];
    w->n_staged = n_rows;
    t0 = now(w);
    w->m->host.gather_rows(&w->m->host, w->stage, (char *)u->param + v->offset * mt_dtype_size(w->m->wdt), w->m->wdt,
                           C, w->staged, w->n_staged);
    traced(w, "gather (embedding rows)", 0, t0);
    pthread_mutex_lock(&w->mu);
    w->rows_gen = gen;
    w->rows_t = w->m->host.now_ms(&w->m->host);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void rows_rest(mt_opt_worker *w, int gen, const mt_adamw_hparams *h, float wd) {
    size_t C = (size_t)w->m->cfg.hidden_size, V = (size_t)w->m->cfg.vocab_size;
    double t0 = now(w);
    size_t nr = row_ranges(w->staged, w->n_staged, 1, V, C, w->m->units[0].lay->t[MT_T_EMBED].offset, w->ranges);
    w->m->host.adamw_ranges(&w->m->host, w->m, &w->m->units[0], w->ranges, nr, h, wd);
    traced(w, "adamw (embedding rest)", 0, t0);
    mark_done(w, 0, gen);
}

// A unit's in-place update after the norm: whole, or part by part, each part published
// (mt_opt_worker_wait_part) as soon as it is done so that its copy can start.
static void update_in_place(mt_opt_worker *w, int gen, int u, const mt_adamw_hparams *h, float wd) {
    mt_unit *x = &w->m->units[u];
    if (w->slice_H > 1) { // this host's slice (host_shard.h); the engine all-gathers the parameters
        mt_elem_range mine;
        size_t off, cnt;
        mt_host_shard_range(x->lay->numel, w->slice_H, w->slice_h, &off, &cnt);
        mine = (mt_elem_range){off, off + cnt};
        if (cnt) w->m->host.adamw_ranges(&w->m->host, w->m, x, &mine, 1, h, wd);
        return;
    }
    if (w->parts <= 1) {
        mt_opt_update_unit(w->m, x, h, wd);
        return;
    }
    for (int p = 0; p < w->parts; p++) {
        size_t lo, hi;
        mt_update_part(x->lay->numel, w->parts, p, &lo, &hi);
        mt_elem_range part = {lo, hi};
        w->m->host.adamw_ranges(&w->m->host, w->m, x, &part, 1, h, wd);
        pthread_mutex_lock(&w->mu);
        w->part_gen[u] = gen;
        w->parts_done[u] = p + 1;
        w->part_t[(size_t)u * w->parts + p] = w->m->host.now_ms(&w->m->host);
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

// The final pass of generation `gen`, in forward order. A speculated unit is kept
// by a swap, or (a rollback: other hyper-parameters, or a skipped step) its spare
// result is dropped and the unit, untouched, is updated as any other. Where the next
// forward's rows were given, the embedding is updated in two parts (rows_first).
static void final_pass(mt_opt_worker *w, int gen, const mt_adamw_hparams *h, float wd, int skip, int rollback) {
    pthread_mutex_lock(&w->mu); // the rows given for this pass, taken (the next pass's come after it ends)
    size_t n_rows = w->n_next;
    w->n_next = 0;
    pthread_mutex_unlock(&w->mu);
    int rows = n_rows && !skip && !(w->spec[0] && !rollback) && !(w->on_device && w->on_device[0]) && w->slice_H <= 1;
    // Kept speculative updates first: a swap each, published at once, so their copies need
    // not wait behind the rows' and the other units' updates (mt_opt_worker_published).
    int kept[w->m->n_units];
    for (int u = 0; u < w->m->n_units; u++) {
        kept[u] = w->spec[u] && !rollback;
        if (kept[u]) {
            keep_spare(w, u);
            w->kept_gen[u] = gen; // read under the lock once `begun` says so
            mark_done(w, u, gen);
        }
    }
    pthread_mutex_lock(&w->mu);
    w->begun = gen;
    w->begun_t = w->m->host.now_ms(&w->m->host);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int u = 0; u < w->m->n_units; u++) {
        if (kept[u]) continue;
        if (w->on_device && w->on_device[u]) { // the device's update: the engine enqueued it
            mark_done(w, u, gen);
            continue;
        }
        if (u == 0 && rows) {
            rows_first(w, gen, n_rows, h, wd);
            continue;
        }
        if (!skip) {
            double t0 = now(w);
            update_in_place(w, gen, u, h, wd);
            traced(w, "adamw", u, t0);
            if (w->publish && w->publish_status == MT_OK) { // every host's worker, unit by unit in this order
                t0 = now(w);
                mt_status ps = w->publish(w->publish_ctx, u);
                pthread_mutex_lock(&w->mu);
                if ((w->publish_status = ps) != MT_OK)
                    snprintf(w->publish_error, sizeof w->publish_error, "%s", mt_last_error());
                pthread_mutex_unlock(&w->mu);
                traced(w, "all-gather", u, t0);
            }
        }
        mark_done(w, u, gen);
    }
    if (rows) rows_rest(w, gen, h, wd);
}

// The speculative update keeps its result only under the very same hyper-parameters.
static int same_hparams(const mt_adamw_hparams *a, float wa, const mt_adamw_hparams *b, float wb) {
    return a->lr == b->lr && a->beta1 == b->beta1 && a->beta2 == b->beta2 && a->eps == b->eps &&
           a->grad_scale == b->grad_scale && a->step == b->step && wa == wb;
}

// The head of the speculation queue: whether its unit may be speculated (the
// running norm when it became final is finite and below the clip), and the time
// the worker would begin it.
static int head_eligible(mt_opt_worker *w, double *begin) {
    int k = w->q_head;
    double norm = sqrt(w->queue_sq[k]), now_t = w->m->host.now_ms(&w->m->host);
    *begin = w->queue_t[k] > now_t ? w->queue_t[k] : now_t;
    return w->spare_param[w->queue[k]] && isfinite(norm) && (w->clip <= 0 || norm < w->clip);
}

// Pops the head and speculates it (called and returns with the lock held).
static void speculate_head(mt_opt_worker *w) {
    int u = w->queue[w->q_head];
    double t = w->queue_t[w->q_head];
    w->q_head = (w->q_head + 1) % w->m->n_units, w->q_len--;
    w->spec[u] = 1;
    mt_adamw_hparams h = w->hs;
    float wd = w->wd_s;
    pthread_mutex_unlock(&w->mu);
    w->m->host.waited_until(&w->m->host, t);
    speculate_unit(w, u, &h, wd);
    pthread_mutex_lock(&w->mu);
}

static void *worker_main(void *arg) {
    mt_opt_worker *w = arg;
    int gen = 0;
    mt_vlane_bind(w->lane);
    pthread_mutex_lock(&w->mu);
    for (;;) {
        if (w->settling != w->resolved) {
            // The norm is known from start_t on: what is still queued was speculated
            // only if the worker would have begun it before then (on its own clock:
            // wall time, or its virtual time, so a priced run decides as a real one).
            while (w->spec_open && w->q_len) {
                double begin;
                if (!head_eligible(w, &begin)) {
                    w->q_head = (w->q_head + 1) % w->m->n_units, w->q_len--;
                    continue;
                }
                if (!(begin < w->start_t)) break;
                speculate_head(w);
            }
            w->spec_open = 0;
            w->q_len = 0;
            int n_spec = 0;
            for (int u = 0; u < w->m->n_units; u++) n_spec += w->spec[u];
            w->resolved_spec = n_spec;
            w->resolved = w->settling;
            pthread_cond_broadcast(&w->cv);
            continue;
        }
        if (w->started != gen) { // the final pass: the next step's forward waits on it
            gen++;
            mt_adamw_hparams h = w->h;
            float wd = w->wd;
            int skip = w->skip, rollback = w->rollback; // decided when settled: hs may be the next step's by now
            w->m->host.waited_until(&w->m->host, w->start_t);
            pthread_mutex_unlock(&w->mu);
            final_pass(w, gen, &h, wd, skip, rollback);
            mt_vlane_done(w->lane, w->m->host.now_ms(&w->m->host));
            pthread_mutex_lock(&w->mu);
            continue;
        }
        if (w->spec_open && w->q_len) {
            double begin;
            if (!head_eligible(w, &begin)) {
                w->q_head = (w->q_head + 1) % w->m->n_units, w->q_len--;
                continue;
            }
            // Speculate what has surely begun before the norm can be known; under
            // virtual time nothing is sure before the step's start says when.
            if (begin <= w->m->host.shared_now_ms(&w->m->host)) {
                speculate_head(w);
                continue;
            }
        }
        if (w->stop) break;
        pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

mt_status mt_opt_worker_create(mt_model *m, int window, size_t rows_cap, int parts, mt_opt_worker **out) {
    mt_opt_worker *w = calloc(1, sizeof *w);
    if (!w) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the optimizer worker");
    int n = m->n_units;
    w->m = m;
    w->window = window < n - 1 ? window : n - 1;
    w->done = calloc((size_t)n, sizeof *w->done);
    w->done_t = calloc((size_t)n, sizeof *w->done_t);
    w->spare_param = calloc((size_t)n, sizeof *w->spare_param);
    w->spare_optim = calloc((size_t)n, sizeof *w->spare_optim);
    w->queue = calloc((size_t)n, sizeof *w->queue);
    w->queue_t = calloc((size_t)n, sizeof *w->queue_t);
    w->queue_sq = calloc((size_t)n, sizeof *w->queue_sq);
    w->spec = calloc((size_t)n, sizeof *w->spec);
    w->kept_gen = calloc((size_t)n, sizeof *w->kept_gen);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->lane = mt_backend_has(m->host.be, MT_CAP_VIRTUAL_TIME) ? mt_vlane_open(m->host.be) : -1; // virtual time only
    *out = w;
    if (!w->done || !w->done_t || !w->spare_param || !w->spare_optim || !w->queue || !w->queue_t || !w->queue_sq ||
        !w->spec || !w->kept_gen)
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the optimizer worker");
    w->rows_gen = -1; // no pass has staged rows
    if (parts > 1) {
        w->parts = parts;
        w->part_gen = calloc((size_t)n, sizeof *w->part_gen);
        w->parts_done = calloc((size_t)n, sizeof *w->parts_done);
        w->part_t = calloc((size_t)n * parts, sizeof *w->part_t);
        if (!w->part_gen || !w->parts_done || !w->part_t)
            return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the optimizer worker");
    }
    if (rows_cap) {
        size_t V = (size_t)m->cfg.vocab_size;
        w->rows_cap = rows_cap;
        w->next_rows = malloc(rows_cap * sizeof *w->next_rows);
        w->staged = malloc(rows_cap * sizeof *w->staged);
        w->slot = malloc(V * sizeof *w->slot);
        w->ranges = malloc((rows_cap + 1) * sizeof *w->ranges);
        if (!w->next_rows || !w->staged || !w->slot || !w->ranges)
            return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the embedding's row tables");
        for (size_t i = 0; i < V; i++) w->slot[i] = -1;
        w->stage_bytes = rows_cap * (size_t)m->cfg.hidden_size * mt_dtype_size(m->wdt);
        MT_TRY(m->host.alloc(&m->host, w->stage_bytes, m->pinned, &w->stage));
    }
    for (int k = 0; k < w->window; k++) {
        mt_unit *u = &m->units[n - 2 - k];
        MT_TRY(m->host.alloc(&m->host, u->param_bytes, m->pinned, &w->spare_param[n - 2 - k]));
        MT_TRY(m->host.alloc(&m->host, u->optim_bytes, 0, &w->spare_optim[n - 2 - k]));
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        return mt_fail(MT_ERR_BACKEND, "cannot start the optimizer thread");
    w->thread_started = 1;
    return MT_OK;
}

void mt_opt_worker_destroy(mt_opt_worker *w) {
    if (!w) return;
    if (w->thread_started) {
        mt_opt_worker_wait_all(w);
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        w->spec_open = 0;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    for (int u = 0; w->spare_param && w->spare_optim && u < w->m->n_units; u++) { // the unit's blocks are as big
        w->m->host.free(&w->m->host, w->spare_param[u], w->m->units[u].param_bytes, w->m->pinned);
        w->m->host.free(&w->m->host, w->spare_optim[u], w->m->units[u].optim_bytes, 0);
    }
    if (w->stage) w->m->host.free(&w->m->host, w->stage, w->stage_bytes, w->m->pinned);
    free(w->next_rows);
    free(w->staged);
    free(w->slot);
    free(w->ranges);
    free(w->part_gen);
    free(w->parts_done);
    free(w->part_t);
    mt_vlane_close(w->lane);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->done);
    free(w->done_t);
    free(w->spare_param);
    free(w->spare_optim);
    free(w->queue);
    free(w->queue_t);
    free(w->queue_sq);
    free(w->spec);
    free(w->kept_gen);
    free(w);
}

void mt_opt_worker_set_trace(mt_opt_worker *w, mt_trace *t) { w->trace = t; }

void mt_opt_worker_set_device_units(mt_opt_worker *w, const unsigned char *on) { w->on_device = on; }

void mt_opt_worker_speculate(mt_opt_worker *w, const mt_adamw_hparams *h, float weight_decay, float clip) {
    if (!w->window) return;
    pthread_mutex_lock(&w->mu);
    w->hs = *h;
    w->hs.grad_scale = 1.0f;
    w->wd_s = weight_decay;
    w->clip = clip;
    w->partial = 0;
    w->q_head = w->q_len = 0;
    w->spec_open = 1;
    pthread_mutex_unlock(&w->mu);
}

void mt_opt_worker_grad_final(mt_opt_worker *w, int u, double sumsq) {
    if (!w->window) return;
    double t = w->m->host.now_ms(&w->m->host);
    pthread_mutex_lock(&w->mu);
    if (w->spec_open) {
        w->partial += sumsq;
        if (w->on_device && w->on_device[u]) { // updated on the device after the norm, never speculated here
            pthread_mutex_unlock(&w->mu);
            return;
        }
        int k = (w->q_head + w->q_len) % w->m->n_units; // each unit is final once per step: never more than n
        w->queue[k] = u;
        w->queue_t[k] = t;
        w->queue_sq[k] = w->partial;
        w->q_len++;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

void mt_opt_worker_settle(mt_opt_worker *w, const mt_adamw_hparams *h, float weight_decay, int skip, int *spec_units,
                          int *rollbacks) {
    mt_opt_worker_wait_all(w); // one update in flight at a time
    pthread_mutex_lock(&w->mu);
    w->h = *h;
    w->wd = weight_decay;
    w->skip = skip;
    w->start_t = w->m->host.now_ms(&w->m->host);
    w->settling++;
    pthread_cond_broadcast(&w->cv);
    // The worker settles what was speculated (at most the unit it is updating, on
    // the wall clock) before the counts are known.
    while (w->resolved != w->settling) pthread_cond_wait(&w->cv, &w->mu);
    int n_spec = w->resolved_spec, rollback = skip || !same_hparams(h, weight_decay, &w->hs, w->wd_s);
    w->rollback = rollback;
    pthread_mutex_unlock(&w->mu);
    if (spec_units) *spec_units = n_spec;
    if (rollbacks) *rollbacks = rollback ? n_spec : 0;
}

void mt_opt_worker_start(mt_opt_worker *w) {
    pthread_mutex_lock(&w->mu);
    mt_vlane_give(w->lane);
    w->started++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

// Time waited, on the engine's clock: wall time, or virtual time under a priced backend.
double mt_opt_worker_wait_unit(mt_opt_worker *w, int u) {
    const mt_host_work *h = &w->m->host;
    double t0 = h->now_ms(h);
    pthread_mutex_lock(&w->mu);
    while (w->done[u] != w->started) pthread_cond_wait(&w->cv, &w->mu);
    double t = w->done_t[u];
    pthread_mutex_unlock(&w->mu);
    h->waited_until(h, t);
    return h->now_ms(h) - t0;
}

void mt_opt_worker_set_slice(mt_opt_worker *w, int H, int h, mt_status (*publish)(void *ctx, int u), void *ctx) {
    w->slice_H = H;
    w->slice_h = h;
    w->publish = publish;
    w->publish_ctx = ctx;
}

mt_status mt_opt_worker_status(mt_opt_worker *w, int wait) {
    if (wait) mt_opt_worker_wait_all(w);
    pthread_mutex_lock(&w->mu); // set by the worker before it marks the unit done
    mt_status s = w->publish_status;
    pthread_mutex_unlock(&w->mu);
    return s == MT_OK ? MT_OK : mt_fail(s, "%s", w->publish_error);
}

double mt_opt_worker_wait_all(mt_opt_worker *w) {
    const mt_host_work *h = &w->m->host;
    double t0 = h->now_ms(h);
    for (int u = 0; u < w->m->n_units; u++) mt_opt_worker_wait_unit(w, u); // the embedding's other rows come last
    return h->now_ms(h) - t0;
}

int mt_opt_worker_published(mt_opt_worker *w, int u) {
    if (!w->started) return 1; // no update yet: the initial state is final
    const mt_host_work *h = &w->m->host;
    pthread_mutex_lock(&w->mu);
    while (w->begun != w->started) pthread_cond_wait(&w->cv, &w->mu);
    // Kept, not merely done by now: under virtual time the pass may have run ahead on the wall clock.
    int done = w->kept_gen[u] == w->started;
    double t = w->begun_t;
    pthread_mutex_unlock(&w->mu);
    h->waited_until(h, t);
    return done;
}

int mt_opt_worker_parts(const mt_opt_worker *w) { return w->parts > 1 ? w->parts : 1; }

double mt_opt_worker_wait_part(mt_opt_worker *w, int u, int p) {
    if (w->parts <= 1) return mt_opt_worker_wait_unit(w, u);
    const mt_host_work *h = &w->m->host;
    double t0 = h->now_ms(h), t;
    pthread_mutex_lock(&w->mu);
    while (w->done[u] != w->started && !(w->part_gen[u] == w->started && w->parts_done[u] > p))
        pthread_cond_wait(&w->cv, &w->mu);
    // Done in parts this pass: that part's time; else (kept, skipped, or whole) the unit's.
    t = w->part_gen[u] == w->started && w->parts_done[u] > p ? w->part_t[(size_t)u * w->parts + p] : w->done_t[u];
    pthread_mutex_unlock(&w->mu);
    h->waited_until(h, t);
    return h->now_ms(h) - t0;
}

void mt_opt_worker_rows_next(mt_opt_worker *w, const int32_t *rows, size_t n) {
    pthread_mutex_lock(&w->mu);
    w->n_next = n <= w->rows_cap ? n : 0; // more than the stage holds: the whole table crosses
    if (w->n_next) memcpy(w->next_rows, rows, n * sizeof *rows);
    pthread_mutex_unlock(&w->mu);
}

int mt_opt_worker_wait_rows(mt_opt_worker *w, const int32_t *need, size_t n, mt_staged_rows *out, double *waited_ms) {
    const mt_host_work *h = &w->m->host;
    double t0 = h->now_ms(h), t;
    int staged = 0;
    pthread_mutex_lock(&w->mu);
    while (w->done[0] != w->started && w->rows_gen != w->started) pthread_cond_wait(&w->cv, &w->mu);
    staged = w->rows_gen == w->started; // this pass staged rows: are the needed ones among them?
    for (size_t i = 0; staged && i < n; i++) staged = w->slot[need[i]] >= 0;
    if (staged) {
        t = w->rows_t;
        *out = (mt_staged_rows){.slot = w->slot, .stage = w->stage, .n_rows = w->n_staged};
    } else {
        while (w->done[0] != w->started) pthread_cond_wait(&w->cv, &w->mu);
        t = w->done_t[0];
    }
    pthread_mutex_unlock(&w->mu);
    h->waited_until(h, t);
    *waited_ms = h->now_ms(h) - t0;
    return staged;
}
