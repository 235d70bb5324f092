// sim_trace.c: the simulated timeline as Chrome trace-event JSON (loads in
// Perfetto and chrome://tracing): process 1 = the GPU with one thread per
// stream, process 2 = the host threads that did priced work. Times in us.
// Written through a temporary and a rename (core/out_file.h): no partial file is left.
// The host threads record in whatever order the OS runs them: the file lists the ops
// by time and the host lanes by name, so the same inputs give the same bytes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/sim/sim_internal.h"
#include "core/out_file.h"

static const char *const stream_names[MT_NUM_STREAMS] = {"compute", "h2d", "d2h"};

static void write_event(FILE *f, const mt_sim_rec *r, const int *host_tid) {
    int gpu = r->lane < MT_NUM_STREAMS;
    double dur_ms = r->end - r->start;
    fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{", r->name,
            r->start * 1e3, dur_ms * 1e3, gpu ? 1 : 2, gpu ? r->lane : host_tid[r->lane - MT_SIM_HOST_LANE0]);
    if (r->unit == MT_SIM_FLOPS)
        fprintf(f, "\"flops\":%.0f,\"tflops\":%.2f}}", r->amount, dur_ms > 0 ? r->amount / dur_ms / 1e9 : 0.0);
    else if (r->unit == MT_SIM_BYTES)
        fprintf(f, "\"bytes\":%.0f,\"gbps\":%.2f}}", r->amount, dur_ms > 0 ? r->amount / dur_ms / 1e6 : 0.0);
    else
        fprintf(f, "\"elements\":%.0f}}", r->amount);
}

static const int *sort_tid; // qsort has no context argument: the host lanes' order, set under the sim's lock

static int cmp_d(double a, double b) { return a < b ? -1 : a > b; }

static int lane_key(int lane) {
    return lane < MT_NUM_STREAMS ? lane : MT_NUM_STREAMS + sort_tid[lane - MT_SIM_HOST_LANE0];
}

static int by_time(const void *pa, const void *pb) {
    const mt_sim_rec *a = *(const mt_sim_rec *const *)pa, *b = *(const mt_sim_rec *const *)pb;
    int c = cmp_d(a->start, b->start);
    if (!c) c = lane_key(a->lane) - lane_key(b->lane);
    if (!c) c = cmp_d(a->end, b->end);
    if (!c) c = strcmp(a->name, b->name);
    return c ? c : cmp_d(a->amount, b->amount);
}

static void write_all_locked(FILE *f, const mt_sim_ctx *c, const mt_sim_rec **order, size_t n) {
    int n_lanes = c->st.n_host_lanes, tid[MT_SIM_MAX_LANES], by_name[MT_SIM_MAX_LANES];
    for (int i = 0; i < n_lanes; i++) by_name[i] = i;
    for (int i = 1; i < n_lanes; i++) // the lanes ordered by name (insertion sort: at most 16)
        for (int j = i; j > 0 && strcmp(c->st.host_lane_name[by_name[j]], c->st.host_lane_name[by_name[j - 1]]) < 0;
             j--) {
            int t = by_name[j];
            by_name[j] = by_name[j - 1], by_name[j - 1] = t;
        }
    for (int k = 0; k < n_lanes; k++) tid[by_name[k]] = k;
    for (size_t i = 0; i < n; i++) order[i] = &c->rec[i];
    sort_tid = tid;
    qsort(order, n, sizeof *order, by_time);
    fprintf(
        f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"backend\":\"sim\",\"profile\":\"%s\",\"ops_dropped\":%lld},\n",
        c->prof.name, c->st.n_trace_dropped);
    fprintf(f,
            "\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"GPU "
            "(sim: %s)\"}}",
            c->prof.name);
    for (int s = 0; s < MT_NUM_STREAMS; s++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", s,
                stream_names[s]);
    fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"tid\":0,\"args\":{\"name\":\"host threads\"}}");
    for (int k = 0; k < n_lanes; k++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", k,
                c->st.host_lane_name[by_name[k]]);
    for (size_t i = 0; i < n; i++) write_event(f, order[i], tid);
    fprintf(f, "\n]}\n");
}

mt_status mt_sim_trace_write(mt_backend *be, const char *path) {
    mt_sim_ctx *c = mt_sim_ctx_of(be);
    pthread_mutex_lock(&c->mu);
    size_t n = c->n_rec; // written when the engine is done: nothing is recorded after
    const mt_sim_rec **order = malloc((n ? n : 1) * sizeof *order);
    pthread_mutex_unlock(&c->mu);
    if (!order) return mt_fail(MT_ERR_MEMORY, "sim: cannot sort the trace's ops");
    mt_out_file out;
    mt_status s = mt_out_open(&out, "--trace (its .ops.json)", path, MT_OUT_FILE);
    if (s == MT_OK) {
        pthread_mutex_lock(&c->mu);
        write_all_locked(out.f, c, order, n);
        pthread_mutex_unlock(&c->mu);
        s = mt_out_close(&out);
    }
    free(order);
    return s;
}
