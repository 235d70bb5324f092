// test_sim_contention.c: the sim prices the host memory that a copy shares with
// the host's passes (sim.h, "host memory"). On the H200 profile the share a
// weight copy keeps beside AdamW comes out of the measured rates near the 74%
// measured on that machine (a check, not a parameter); a copy overlapped by
// AdamW takes solo/share, one that is not keeps its solo time; and a copy waits
// for a host lane that is behind it in real time (conservative synchronisation),
// so the answer does not depend on which thread the OS runs first.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/backend_call.h"
#include "backends/sim/sim.h"
#include "core/vclock.h"
#include "test_util.h"

#define PROFILE "experiments/hardware/h200-128g.json"
#define COPY_BYTES 1000000000.0
#define ADAMW_PARAMS 10000000000ull // ~1.5 s of AdamW: longer than any copy below

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) + 1.0); }

static mt_backend *sim(void) {
    mt_backend *be = NULL;
    if (mt_backend_sim_create(PROFILE, MT_BF16, &be) != MT_OK) {
        fprintf(stderr, "sim create: %s\nHINT: run from the repository root\n", mt_last_error());
        exit(1);
    }
    return be;
}

// AdamW (paper) alone: its demand on the host memory, GB/s.
static double adamw_gbps(const mt_hw_profile *p) {
    return mt_sim_host_work_bytes(p, MT_HOST_ADAMW, ADAMW_PARAMS, MT_BF16, 0) /
           (mt_sim_host_work_ms(p, MT_HOST_ADAMW, ADAMW_PARAMS, MT_BF16, 0) * 1e6);
}

static void test_h200_share(void) {
    mt_hw_profile p;
    CHECK(mt_hw_profile_load(PROFILE, &p) == MT_OK, "%s: %s", PROFILE, mt_last_error());
    double a = adamw_gbps(&p), share = mt_sim_copy_share(&p, p.h2d_gbps, a);
    CHECK(mt_sim_host_shared_gbps(&p) >= a && mt_sim_host_shared_gbps(&p) >= p.host_mem_gbps,
          "shared bandwidth %.2f is at least every measured host rate", mt_sim_host_shared_gbps(&p));
    CHECK(near(share, mt_sim_host_shared_gbps(&p) / (p.h2d_gbps + a)), "share %.4f is S/(r+a)", share);
    CHECK(fabs(share - 0.74) < 0.03, "H200: a weight copy beside AdamW keeps %.1f%% of its rate (74%% measured)",
          100 * share);
    CHECK(mt_sim_copy_share(&p, p.h2d_gbps, 0) == 1.0, "no host pass: the copy keeps its rate");
}

// The duration of one pinned 1 GB H2D copy issued now by the calling thread.
static double copy_ms(mt_backend *be) {
    void *h = NULL, *d = NULL;
    CHECK(mt_backend_host_alloc(be, (size_t)COPY_BYTES, &h) == MT_OK, "host_alloc: %s", mt_last_error());
    CHECK(mt_backend_dev_alloc(be, (size_t)COPY_BYTES, &d) == MT_OK, "dev_alloc: %s", mt_last_error());
    mt_backend_copy(be, d, h, (size_t)COPY_BYTES, MT_COPY_H2D, MT_STREAM_H2D);
    double t0 = mt_vclock_now();
    mt_backend_stream_sync(be, MT_STREAM_H2D);
    return mt_vclock_now() - t0;
}

static void test_overlap(void) {
    mt_backend *be = sim();
    const mt_hw_profile *p = mt_sim_profile_of(be);
    double solo = mt_sim_link_ms(p, MT_COPY_H2D, 1, COPY_BYTES), share = mt_sim_copy_share(p, p->h2d_gbps, adamw_gbps(p));
    CHECK(near(copy_ms(be), solo), "a copy alone: %.6f ms", solo);
    mt_backend_destroy(be);

    be = sim(); // the creating thread prices AdamW from 0 and does not wait for it: the copy overlaps it
    mt_backend_host_work_ms(be, MT_HOST_ADAMW, ADAMW_PARAMS, MT_BF16, 0);
    double t = copy_ms(be);
    CHECK(near(t, solo / share), "a copy under AdamW: %.6f ms, expected solo/share %.6f", t, solo / share);
    CHECK(t > solo * 1.3, "slower than alone (%.3f vs %.3f ms)", t, solo);
    mt_backend_destroy(be);
}

typedef struct {
    mt_backend *be;
    int lane;
    double start_ms; // the lane's virtual time when it prices its AdamW
} lane_arg;

// A host lane that is slow in real time: it prices its AdamW only after the copy was issued.
static void *late_lane(void *v) {
    lane_arg *a = v;
    mt_vlane_bind(a->lane);
    usleep(100000);
    mt_vclock_set(a->start_ms);
    mt_vclock_advance(mt_backend_host_work_ms(a->be, MT_HOST_ADAMW, ADAMW_PARAMS, MT_BF16, 0));
    mt_vlane_done(a->lane, mt_vclock_now());
    return NULL;
}

static double copy_beside_late_lane(double lane_start_ms) {
    mt_backend *be = sim();
    lane_arg a = {be, mt_vlane_open(be), lane_start_ms};
    CHECK(a.lane >= 0, "a lane opens");
    mt_vlane_give(a.lane); // its producer hands it an item before waking it
    pthread_t th;
    CHECK(pthread_create(&th, NULL, late_lane, &a) == 0, "lane thread");
    double t = copy_ms(be);
    pthread_join(th, NULL);
    mt_vlane_close(a.lane);
    mt_backend_destroy(be);
    return t;
}

static void test_lane_sync(void) {
    mt_hw_profile p;
    mt_hw_profile_load(PROFILE, &p);
    double solo = mt_sim_link_ms(&p, MT_COPY_H2D, 1, COPY_BYTES), share = mt_sim_copy_share(&p, p.h2d_gbps, adamw_gbps(&p));
    double t = copy_beside_late_lane(0);
    CHECK(near(t, solo / share), "the copy waited for the late lane's AdamW: %.6f ms, expected %.6f (alone %.6f)", t,
          solo / share, solo);
    t = copy_beside_late_lane(1000); // its AdamW starts after the copy ends: nothing shared
    CHECK(near(t, solo), "AdamW after the copy: %.6f ms, expected %.6f", t, solo);
}

int main(void) {
    test_h200_share();
    test_overlap();
    test_lane_sync();
    return mt_test_finish("test_sim_contention");
}
