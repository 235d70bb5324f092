// grad_drain.c: the slab pool and its drain thread.
#include "engine/grad_drain.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/vclock.h"

typedef struct {
    mt_offload o;
    int slab;
    double t_enqueue; // when the task was queued (the host work's clock)
} drain_task;

struct mt_drain {
    mt_backend *be;
    int n_slabs;
    size_t slab_bytes;
    void **slabs;
    mt_event **slab_ev;
    int *slab_busy;
    const mt_host_work *h;
    double *slab_free_t;  // when each slab was last released (the host work's clock)
    double last_finish_t; // when the last drain finished
    // FIFO of tasks (at most n_slabs in flight, one per busy slab)
    drain_task *queue;
    int q_head, q_len;
    int next_slab;
    int stop;
    mt_status error;
    char error_msg[512];
    double wait_ms;
    mt_traced_copy *lk;
    mt_drain_final_fn on_final;
    void *on_final_ctx;
    mt_collective *coll; // --gpus N: lands the slabs in the ranks' fixed order (NULL: one rank)
    int rank;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_started;
    int lane; // its host lane (core/vclock.h): the sim's copies wait for what it has in hand
};

static void *drain_main(void *arg) {
    mt_drain *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->q_len && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
        if (!d->q_len && d->stop) break;
        drain_task t = d->queue[d->q_head];
        pthread_mutex_unlock(&d->mu);

        mt_vlane_bind(d->coll ? -1 : d->lane); // a collective's landing waits on other ranks: not synchronised
        d->h->waited_until(d->h, t.t_enqueue);
        const mt_offload *o = &t.o;
        size_t n = o->count;
        mt_status s = mt_backend_event_sync(d->be, d->slab_ev[t.slab]);
        mt_trace *tr = d->lk->trace;
        double t0 = mt_trace_host_now(tr);
        if (s == MT_OK && d->coll) {
            mt_landing l = {.u = o->u, .unit = o->unit, .rank = d->rank, .mb = o->mb, .G = o->G, .wdt = o->wdt,
                            .wire = o->wire, .slab = d->slabs[t.slab], .off = o->off, .count = n};
            double sq = 0;
            if (d->coll->land(d->coll, d->h, &l, &sq) && d->on_final) d->on_final(d->on_final_ctx, o->unit, sq);
        } else if (s == MT_OK) {
            void *src = o->direct ? o->u->grad : d->slabs[t.slab]; // direct: already in place
            double sq = d->h->accumulate(d->h, o->u->grad, o->wdt, src, o->wire, n, o->first, o->last);
            if (o->last && d->on_final) d->on_final(d->on_final_ctx, o->unit, sq);
        }
        mt_trace_host(tr, MT_LANE_DRAIN, o->direct ? "sum of squares" : "accumulate", o->u->layer, t0,
                      mt_trace_host_now(tr));

        mt_vlane_done(d->lane, d->h->now_ms(d->h));
        pthread_mutex_lock(&d->mu);
        if (s != MT_OK && d->error == MT_OK) {
            d->error = s;
            strncpy(d->error_msg, mt_last_error(), sizeof d->error_msg - 1);
        }
        d->q_head = (d->q_head + 1) % d->n_slabs;
        d->q_len--;
        d->slab_busy[t.slab] = 0;
        d->slab_free_t[t.slab] = d->last_finish_t = d->h->now_ms(d->h);
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

mt_status mt_drain_create(mt_backend *be, mt_traced_copy *lk, const mt_host_work *h, int n_slabs, size_t slab_bytes,
                          mt_drain **out) {
    mt_drain *d = calloc(1, sizeof *d);
    if (!d) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the gradient drain");
    d->be = be;
    d->lk = lk;
    d->h = h;
    d->n_slabs = n_slabs;
    d->slab_bytes = slab_bytes;
    d->slabs = calloc((size_t)n_slabs, sizeof *d->slabs);
    d->slab_ev = calloc((size_t)n_slabs, sizeof *d->slab_ev);
    d->slab_busy = calloc((size_t)n_slabs, sizeof *d->slab_busy);
    d->queue = calloc((size_t)n_slabs, sizeof *d->queue);
    d->slab_free_t = calloc((size_t)n_slabs, sizeof *d->slab_free_t);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->lane = mt_backend_has(be, MT_CAP_VIRTUAL_TIME) ? mt_vlane_open(be) : -1; // lanes order virtual time only
    *out = d;
    if (!d->slabs || !d->slab_ev || !d->slab_busy || !d->queue || !d->slab_free_t)
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the gradient drain");
    for (int i = 0; i < n_slabs; i++) {
        MT_TRY(mt_backend_host_alloc(be, slab_bytes, &d->slabs[i]));
        MT_TRY(mt_backend_event_create(be, &d->slab_ev[i]));
    }
    if (pthread_create(&d->thread, NULL, drain_main, d) != 0)
        return mt_fail(MT_ERR_BACKEND, "cannot start the gradient drain thread");
    d->thread_started = 1;
    return MT_OK;
}

void mt_drain_destroy(mt_drain *d) {
    if (!d) return;
    if (d->thread_started) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    for (int i = 0; i < d->n_slabs; i++) {
        if (d->slabs && d->slabs[i]) mt_backend_host_free(d->be, d->slabs[i], d->slab_bytes);
        if (d->slab_ev && d->slab_ev[i]) mt_backend_event_destroy(d->be, d->slab_ev[i]);
    }
    free(d->slabs);
    free(d->slab_ev);
    free(d->slab_busy);
    free(d->queue);
    free(d->slab_free_t);
    mt_vlane_close(d->lane);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

mt_status mt_drain_offload(mt_drain *d, const mt_offload *of) {
    size_t bytes = of->count * mt_dtype_size(of->wire);
    if (bytes > d->slab_bytes)
        return mt_fail(MT_ERR_SHAPE, "gradient slab too small (%zu < %zu bytes)", d->slab_bytes, bytes);
    // Slabs are used round-robin so the FIFO order of tasks matches slab order.
    int k = d->next_slab;
    double t0 = d->h->now_ms(d->h);
    pthread_mutex_lock(&d->mu);
    while (d->slab_busy[k] && d->error == MT_OK) pthread_cond_wait(&d->cv, &d->mu);
    mt_status err = d->error;
    double free_t = d->slab_free_t[k];
    pthread_mutex_unlock(&d->mu);
    d->h->waited_until(d->h, free_t);
    d->wait_ms += d->h->now_ms(d->h) - t0;
    if (err != MT_OK) return mt_fail(err, "%s", d->error_msg);

    MT_TRY(mt_backend_stream_wait(d->be, of->stream, of->ready));
    MT_TRY(mt_traced_copy_one(d->lk, MT_LANE_D2H, "grads out", of->u->layer, of->direct ? of->u->grad : d->slabs[k],
                              of->dev_grad, bytes, MT_COPY_D2H, of->stream));
    MT_TRY(mt_backend_event_record(d->be, d->slab_ev[k], of->stream));
    if (of->dev_free) MT_TRY(mt_backend_event_record(d->be, of->dev_free, of->stream));

    pthread_mutex_lock(&d->mu);
    d->slab_busy[k] = 1;
    d->queue[(d->q_head + d->q_len) % d->n_slabs] = (drain_task){*of, k, d->h->now_ms(d->h)};
    d->q_len++;
    if (!d->coll) mt_vlane_give(d->lane);
    d->next_slab = (k + 1) % d->n_slabs;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return MT_OK;
}

mt_status mt_drain_wait_all(mt_drain *d) {
    double t0 = d->h->now_ms(d->h);
    pthread_mutex_lock(&d->mu);
    while (d->q_len && d->error == MT_OK) pthread_cond_wait(&d->cv, &d->mu);
    mt_status err = d->error;
    double finish_t = d->last_finish_t;
    pthread_mutex_unlock(&d->mu);
    d->h->waited_until(d->h, finish_t);
    d->wait_ms += d->h->now_ms(d->h) - t0;
    if (err != MT_OK) return mt_fail(err, "%s", d->error_msg);
    return MT_OK;
}

void mt_drain_on_final(mt_drain *d, mt_drain_final_fn fn, void *ctx) {
    d->on_final = fn;
    d->on_final_ctx = ctx;
}

void mt_drain_set_collective(mt_drain *d, mt_collective *c, int rank) {
    d->coll = c;
    d->rank = rank;
}

double mt_drain_take_wait_ms(mt_drain *d) {
    double w = d->wait_ms;
    d->wait_ms = 0;
    return w;
}
