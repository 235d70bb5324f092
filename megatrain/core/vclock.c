// vclock.c: one thread-local double, and the host lanes' table (vclock.h).
#include "core/vclock.h"

#include <pthread.h>

static _Thread_local double vclock_ms;

double mt_vclock_now(void) { return vclock_ms; }
void mt_vclock_set(double t_ms) { vclock_ms = t_ms; }
void mt_vclock_join(double t_ms) {
    if (t_ms > vclock_ms) vclock_ms = t_ms;
}
void mt_vclock_advance(double ms) { vclock_ms += ms; }

#define MAX_LANES 64

typedef struct {
    const void *group; // NULL: a free slot
    int pending;       // items handed and not finished
    double at_ms;      // the lane's next priced work starts here or later
} vlane;

static vlane lanes[MAX_LANES];
static pthread_mutex_t lanes_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lanes_cv = PTHREAD_COND_INITIALIZER;
static _Thread_local int self_lane = -1;

int mt_vlane_open(const void *group) {
    pthread_mutex_lock(&lanes_mu);
    int id = -1;
    for (int i = 0; i < MAX_LANES && id < 0; i++)
        if (!lanes[i].group) id = i;
    if (id >= 0) lanes[id] = (vlane){group, 0, 0};
    pthread_mutex_unlock(&lanes_mu);
    return id;
}

void mt_vlane_close(int lane) {
    if (lane < 0) return;
    pthread_mutex_lock(&lanes_mu);
    lanes[lane] = (vlane){0};
    pthread_cond_broadcast(&lanes_cv);
    pthread_mutex_unlock(&lanes_mu);
}

void mt_vlane_bind(int lane) { self_lane = lane; }
int mt_vlane_self(void) { return self_lane; }

void mt_vlane_give(int lane) {
    if (lane < 0) return;
    pthread_mutex_lock(&lanes_mu);
    lanes[lane].pending++;
    pthread_mutex_unlock(&lanes_mu);
}

void mt_vlane_at(int lane, double t_ms) {
    if (lane < 0) return;
    pthread_mutex_lock(&lanes_mu);
    if (t_ms > lanes[lane].at_ms) lanes[lane].at_ms = t_ms;
    pthread_cond_broadcast(&lanes_cv);
    pthread_mutex_unlock(&lanes_mu);
}

void mt_vlane_done(int lane, double t_ms) {
    if (lane < 0) return;
    pthread_mutex_lock(&lanes_mu);
    if (lanes[lane].pending > 0) lanes[lane].pending--;
    if (t_ms > lanes[lane].at_ms) lanes[lane].at_ms = t_ms;
    pthread_cond_broadcast(&lanes_cv);
    pthread_mutex_unlock(&lanes_mu);
}

static int behind_locked(const void *group, double t_ms) {
    for (int i = 0; i < MAX_LANES; i++)
        if (i != self_lane && lanes[i].group == group && lanes[i].pending > 0 && lanes[i].at_ms < t_ms) return 1;
    return 0;
}

void mt_vlane_wait_past(const void *group, double t_ms) {
    pthread_mutex_lock(&lanes_mu);
    while (behind_locked(group, t_ms)) pthread_cond_wait(&lanes_cv, &lanes_mu);
    pthread_mutex_unlock(&lanes_mu);
}
