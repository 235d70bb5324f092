// thread_room.c: every thread a run needs, started once up front (thread_room.h).
#define _GNU_SOURCE
#include "core/thread_room.h"

#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go;

// Holds until all are started, so the count is of threads alive together.
static void *hold(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!go) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

mt_status mt_thread_room_check(int engine_threads, int teams) {
    int team = omp_get_max_threads() - 1;
    if (team < 0) team = 0;
    int want = engine_threads + teams * team, made = 0, err = 0;
    if (want <= 0) return MT_OK;
    pthread_t *th = calloc((size_t)want, sizeof *th);
    if (!th) return mt_fail(MT_ERR_MEMORY, "cannot allocate %d thread handles", want);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)1 << 20); // the count, not memory (room for static TLS)
    go = 0;
    for (; made < want; made++)
        if ((err = pthread_create(&th[made], &attr, hold, NULL)) != 0) break;
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < made; i++) pthread_join(th[i], NULL);
    pthread_attr_destroy(&attr);
    free(th);
    if (err) {
        struct rlimit rl;
        char lim[64] = "";
        if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(lim, sizeof lim, " (ulimit -u %llu)", (unsigned long long)rl.rlim_cur);
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && !lim[0]) // their stacks did not map
            return mt_fail(MT_ERR_MEMORY, "cannot start the %d threads this run needs, only %d: %s; their stacks do "
                                          "not fit under ulimit -v. HINT: raise ulimit -v, or run fewer threads "
                                          "(OMP_NUM_THREADS)",
                           want, made, strerror(err));
        int fit = teams > 0 && made > engine_threads ? (made - engine_threads) / teams + 1 : 1;
        return mt_fail(MT_ERR_MEMORY, "cannot start the %d threads this run needs (%d engine, %d OpenMP), only %d: %s; "
                                      "the process limit%s counts every thread of this user. HINT: raise ulimit -u, "
                                      "or run fewer threads (OMP_NUM_THREADS=%d)",
                       want, engine_threads, teams * team, made, strerror(err), lim, fit);
    }
    return MT_OK; // (OpenMP's team starts at the first parallel region, after the memory check counts it)
}
