// launch.c: what the sim assumes of the smallest ops (megatrain/backends/sim/sim.h), measured:
//   launch/<backend>/add/<k>   k one-element adds back to back on the compute stream, 15 samples
// Counters (medians over the samples): launch_us = the host's wall time to enqueue one async
// call (MT_SIM_LAUNCH_MS, assumed 5 us); kernel_min_us = the device time of the k ops over k,
// the shortest op's launch-to-retire (MT_SIM_KERNEL_MIN_MS, assumed 2 us): an upper bound where
// it comes out near launch_us (the GPU then waits on the enqueue; the backend interface has no
// spin kernel to queue behind). The reported iteration time is the median device time of the k.
// cpu: a rehearsal (the add runs inline, so both are the host's).
#include <stdio.h>
#include <time.h>

#include "backend/backend_call.h"
#include "mb.h"

#define SAMPLES 15

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bm_launch(mt_mb_state *s, const int64_t *args, const void *user) {
    const char *backend = user, *why = NULL, *fail = NULL;
    int act = backend[1] == 'u' ? MT_BF16 : MT_F32; // "cuda": bf16 as the engine runs; "cpu": f32
    mt_backend *be = mt_mb_backend(backend, act, &why);
    if (!be) {
        mt_mb_error(s, why);
        return;
    }
    const int k = (int)args[0];
    void *x = NULL;
    mt_event *e0 = NULL, *e1 = NULL;
    double host[SAMPLES], dev[SAMPLES];
    if (mt_backend_dev_alloc(be, 64, &x) || mt_backend_event_create(be, &e0) || mt_backend_event_create(be, &e1) ||
        mt_backend_memset_zero(be, x, 64, MT_STREAM_COMPUTE) || mt_backend_stream_sync(be, MT_STREAM_COMPUTE))
        fail = mt_last_error();
    while (!fail && mt_mb_keep_running(s)) { // one iteration (MT_MB_ONE_ITER): the samples inside it
        for (int r = -1; !fail && r < SAMPLES; r++) { // r = -1: a warm-up sample
            double t0 = now_s();
            mt_status st = mt_backend_event_record(be, e0, MT_STREAM_COMPUTE);
            for (int i = 0; st == MT_OK && i < k; i++) st = mt_backend_add(be, x, x, x, 1);
            double t1 = now_s();
            if (st == MT_OK) st = mt_backend_event_record(be, e1, MT_STREAM_COMPUTE);
            if (st == MT_OK) st = mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
            float ms = 0;
            if (st == MT_OK) st = mt_backend_event_elapsed_ms(be, e0, e1, &ms);
            if (st != MT_OK) fail = mt_last_error();
            else if (r >= 0) host[r] = (t1 - t0) * 1e6 / k, dev[r] = ms > 0 ? ms * 1e3 / k : (t1 - t0) * 1e6 / k;
        }
        if (!fail) mt_mb_set_iteration_time(s, mt_mb_median(dev, SAMPLES) * k * 1e-6);
    }
    if (fail) mt_mb_error(s, fail);
    else { // dev is sorted by now: its median is the same
        mt_mb_counter(s, "launch_us", mt_mb_median(host, SAMPLES), 0);
        mt_mb_counter(s, "kernel_min_us", mt_mb_median(dev, SAMPLES), 0);
    }
    if (e0) mt_backend_event_destroy(be, e0);
    if (e1) mt_backend_event_destroy(be, e1);
    if (x) mt_backend_dev_free(be, x);
}

void mt_mb_register_launch(void) {
    static const int64_t k = 1000;
    mt_mb_register("launch/cpu/add", bm_launch, "cpu", &k, 1, MT_MB_MANUAL_TIME | MT_MB_ONE_ITER);
    const char *why = NULL;
    if (!mt_mb_backend("cuda", MT_BF16, &why)) {
        char msg[320];
        snprintf(msg, sizeof msg, "launch/cuda/*: %s", why);
        mt_mb_note("skipped", msg);
        return;
    }
    mt_mb_register("launch/cuda/add", bm_launch, "cuda", &k, 1, MT_MB_MANUAL_TIME | MT_MB_ONE_ITER);
}
