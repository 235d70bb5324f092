// optimizer_worker.c: generation counters per unit, one worker thread.
#include "engine/optimizer_worker.h"

#include <pthread.h>
#include <stdlib.h>

struct mt_opt_worker {
    mt_model *m;
    mt_adamw_hparams h;
    float wd;
    int started;   // updates started
    int *done;     // per unit: updates applied
    double *done_t; // per unit: when its last update finished (the engine clock)
    double start_t; // when the running update was started
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
    m->host.adamw(&m->host, m, u, h, weight_decay);
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
        w->m->host.waited_until(&w->m->host, w->start_t);
        pthread_mutex_unlock(&w->mu);
        for (int u = 0; u < w->m->n_units; u++) {
            double t0 = w->trace ? mt_trace_host_now(w->trace) : 0;
            mt_opt_update_unit(w->m, &w->m->units[u], &h, wd);
            if (w->trace) mt_trace_host(w->trace, MT_LANE_OPTIMIZER, "adamw", w->m->units[u].layer, t0,
                                        mt_trace_host_now(w->trace));
            pthread_mutex_lock(&w->mu);
            w->done[u] = gen;
            w->done_t[u] = w->m->host.now_ms(&w->m->host);
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
    w->start_t = w->m->host.now_ms(&w->m->host);
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

double mt_opt_worker_wait_all(mt_opt_worker *w) {
    return mt_opt_worker_wait_unit(w, w->m->n_units - 1); // units finish in order
}
