// trace.h: a timeline of one step's streams and host threads, from backend
// events (device spans) and the engine clock (host spans). It gives the
// per-phase times every step reports (compute, H2D, D2H busy; optimizer and
// drain time on the host) and, with --trace, a Chrome/Perfetto JSON file.
#ifndef MT_TRACE_H
#define MT_TRACE_H

#include "backend/backend_call.h"
#include "engine/host_work.h"

typedef enum { MT_LANE_COMPUTE = 0, MT_LANE_H2D = 1, MT_LANE_D2H = 2, MT_LANE_DRAIN = 3, MT_LANE_OPTIMIZER = 4,
               MT_LANE_HOST = 5, MT_NUM_LANES = 6 } mt_lane;

typedef struct {
    double busy_ms[MT_NUM_LANES]; // union of span time per lane within the step
    double step_ms;               // first span start to last span end
} mt_phase_times;

typedef struct mt_trace mt_trace;

// keep_all: keep every step's spans for mt_trace_write (else only the current step's).
// Host spans are read on `clock`'s clock (the host work's: wall, or virtual).
mt_status mt_trace_create(mt_backend *be, const mt_host_work *clock, int keep_all, mt_trace **out);
void mt_trace_destroy(mt_trace *t);
// Host clock of the engine (wall ms, or virtual ms under sim).
double mt_trace_host_now(const mt_trace *t);

mt_status mt_trace_step_begin(mt_trace *t, int step);
// Device span on stream s: begin records an event now, end records another.
// The span counts in the lane of stream s ...
mt_status mt_trace_begin(mt_trace *t, mt_stream_id s, const char *name, int layer, int *span);
// ... or in `lane` (a copy issued on the compute stream, as the naive schedule
// does, is still link time, not compute time).
mt_status mt_trace_begin_lane(mt_trace *t, mt_stream_id s, mt_lane lane, const char *name, int layer, int *span);
mt_status mt_trace_end(mt_trace *t, int span);
// Host span (any thread) between two mt_trace_host_now() readings.
void mt_trace_host(mt_trace *t, mt_lane lane, const char *name, int layer, double t0_ms, double t1_ms);
// After the step's work has completed: resolves device times, fills `out`.
mt_status mt_trace_step_end(mt_trace *t, mt_phase_times *out);
// Chrome trace-event JSON of the kept steps.
mt_status mt_trace_write(mt_trace *t, const char *path);

#endif
