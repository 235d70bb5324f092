// optimizer_worker.c: generation counters per unit, one worker thread.
#include "engine/optimizer_worker.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core/vclock.h"

struct mt_opt_worker {
    mt_model *m;
    mt_adamw_hparams h;
    float wd;
    int started;   // updates started
    int *done;     // per unit: updates applied
    double *done_t; // per unit: virtual time of its last update (sim)
    double start_t; // virtual time the running update was started (sim)
    int stop;
    mt_trace *trace;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_started;
};

mt_part_bytes mt_opt_worker_bytes(const mt_engine_shape *sh) {
    (void)sh;
    return (mt_part_bytes){0, 0, 0};
}

void mt_opt_update_unit(mt_model *m, mt_unit *u, const mt_adamw_hparams *h, float weight_decay) {
    size_t ws = mt_dtype_size(m->wdt);
    if (mt_backend_is_virtual(m->be)) { // price the pass instead of doing it
        size_t n = 0;
        for (int t = 0; t < MT_T_COUNT; t++) n += u->lay->t[t].present ? u->lay->t[t].numel : 0;
        mt_vclock_advance(m->be->ops->host_work_ms(m->be, MT_HOST_ADAMW, n, m->wdt, u->master != NULL));
        return;
    }
    for (int t = 0; t < MT_T_COUNT; t++) {
        const mt_view *v = &u->lay->t[t];
        if (!v->present) continue;
        float wd = v->ndim >= 2 ? weight_decay : 0.0f; // no decay on norms and biases (as torch param groups)
        mt_adamw_update(u->master ? u->master + v->offset : NULL, (char *)u->param + v->offset * ws, m->wdt,
                        (char *)u->grad + v->offset * ws, m->wdt, u->m + v->offset, u->v + v->offset, v->numel, h,
                        wd);
    }
}

static void *worker_main(void *arg) {
    mt_opt_worker *w = arg;
    int gen = 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->started == gen && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (w->started == gen && w->stop) break;
        gen++;
        mt_adamw_hparams h = w->h;
        float wd = w->wd;
        mt_vclock_join(w->start_t);
        pthread_mutex_unlock(&w->mu);
        for (int u = 0; u < w->m->n_units; u++) {
            double t0 = w->trace ? mt_trace_host_now(w->trace) : 0;
            mt_opt_update_unit(w->m, &w->m->units[u], &h, wd);
            if (w->trace) mt_trace_host(w->trace, MT_LANE_OPTIMIZER, "adamw", w->m->units[u].layer, t0,
                                        mt_trace_host_now(w->trace));
            pthread_mutex_lock(&w->mu);
            w->done[u] = gen;
            w->done_t[u] = mt_vclock_now();
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->mu);
        }
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

mt_status mt_opt_worker_create(mt_model *m, mt_opt_worker **out) {
    mt_opt_worker *w = calloc(1, sizeof *w);
    if (!w) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the optimizer worker");
    w->m = m;
    w->done = calloc((size_t)m->n_units, sizeof *w->done);
    w->done_t = calloc((size_t)m->n_units, sizeof *w->done_t);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    *out = w;
    if (!w->done || !w->done_t) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the optimizer worker");
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
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->done);
    free(w->done_t);
    free(w);
}

void mt_opt_worker_set_trace(mt_opt_worker *w, mt_trace *t) { w->trace = t; }

void mt_opt_worker_start(mt_opt_worker *w, const mt_adamw_hparams *h, float weight_decay) {
    mt_opt_worker_wait_all(w); // one update in flight at a time
    pthread_mutex_lock(&w->mu);
    w->h = *h;
    w->wd = weight_decay;
    w->started++;
    w->start_t = mt_vclock_now();
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

// Time waited, on the engine's clock: wall time, or virtual time under sim.
static double clock_ms(const mt_opt_worker *w) {
    if (mt_backend_is_virtual(w->m->be)) return mt_vclock_now();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double mt_opt_worker_wait_unit(mt_opt_worker *w, int u) {
    double t0 = clock_ms(w);
    pthread_mutex_lock(&w->mu);
    while (w->done[u] != w->started) pthread_cond_wait(&w->cv, &w->mu);
    double t = w->done_t[u];
    pthread_mutex_unlock(&w->mu);
    mt_vclock_join(t);
    return clock_ms(w) - t0;
}

double mt_opt_worker_wait_all(mt_opt_worker *w) {
    return mt_opt_worker_wait_unit(w, w->m->n_units - 1); // units finish in order
}
