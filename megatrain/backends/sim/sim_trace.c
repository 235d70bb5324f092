// sim_trace.c: the simulated timeline as Chrome trace-event JSON (loads in
// Perfetto and chrome://tracing): process 1 = the GPU with one thread per
// stream, process 2 = the host threads that did priced work. Times in us.
// Written through a temporary and a rename (core/out_file.h): no partial file is left.
#include <stdio.h>
#include <string.h>

#include "backends/sim/sim_internal.h"
#include "core/out_file.h"

static const char *const stream_names[MT_NUM_STREAMS] = {"compute", "h2d", "d2h"};

static void write_event(FILE *f, const mt_sim_rec *r) {
    int gpu = r->lane < MT_NUM_STREAMS;
    double dur_ms = r->end - r->start;
    fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{", r->name,
            r->start * 1e3, dur_ms * 1e3, gpu ? 1 : 2, gpu ? r->lane : r->lane - MT_SIM_HOST_LANE0);
    if (r->unit == MT_SIM_FLOPS)
        fprintf(f, "\"flops\":%.0f,\"tflops\":%.2f}}", r->amount, dur_ms > 0 ? r->amount / dur_ms / 1e9 : 0.0);
    else if (r->unit == MT_SIM_BYTES)
        fprintf(f, "\"bytes\":%.0f,\"gbps\":%.2f}}", r->amount, dur_ms > 0 ? r->amount / dur_ms / 1e6 : 0.0);
    else
        fprintf(f, "\"elements\":%.0f}}", r->amount);
}

static void write_all_locked(FILE *f, const mt_sim_ctx *c) {
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"backend\":\"sim\",\"profile\":\"%s\",\"ops_dropped\":%lld},\n",
            c->prof.name, c->st.n_trace_dropped);
    fprintf(f, "\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"GPU "
               "(sim: %s)\"}}", c->prof.name);
    for (int s = 0; s < MT_NUM_STREAMS; s++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", s,
                stream_names[s]);
    fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"tid\":0,\"args\":{\"name\":\"host threads\"}}");
    for (int i = 0; i < c->st.n_host_lanes; i++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", i,
                c->st.host_lane_name[i]);
    for (size_t i = 0; i < c->n_rec; i++) write_event(f, &c->rec[i]);
    fprintf(f, "\n]}\n");
}

mt_status mt_sim_trace_write(mt_backend *be, const char *path) {
    mt_sim_ctx *c = mt_sim_ctx_of(be);
    mt_out_file out;
    MT_TRY(mt_out_open(&out, "--trace (its .ops.json)", path, MT_OUT_FILE));
    pthread_mutex_lock(&c->mu);
    write_all_locked(out.f, c);
    pthread_mutex_unlock(&c->mu);
    return mt_out_close(&out);
}
