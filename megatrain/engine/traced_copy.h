// traced_copy.h: copies across the host-device link as the engine makes them. Each
// sits in a trace span on its lane (weights in, gradients out, checkpoints in
// and out) and its bytes count for the step, so h2d_gbps and d2h_gbps are the
// bytes of the spans over the time of the spans. Token ids and losses are not
// link traffic here: they are copied with the plain backend call.
#ifndef MT_TRACED_COPY_H
#define MT_TRACED_COPY_H

#include "backend/backend_call.h"
#include "engine/trace.h"

typedef struct {
    mt_backend *be;
    mt_trace *trace;
    double bytes[2]; // this step: [0] host to device, [1] device to host
} mt_traced_copy;

// A span that may hold several copies (a layer fetched piece by piece).
mt_status mt_traced_copy_begin(mt_traced_copy *lk, mt_stream_id s, mt_lane lane, const char *what, int layer,
                               int *span);
mt_status mt_traced_copy_issue(mt_traced_copy *lk, void *dst, const void *src, size_t bytes, mt_copy_kind kind,
                               mt_stream_id s);
mt_status mt_traced_copy_end(mt_traced_copy *lk, int span);
// One copy in its own span.
mt_status mt_traced_copy_one(mt_traced_copy *lk, mt_lane lane, const char *what, int layer, void *dst, const void *src,
                             size_t bytes, mt_copy_kind kind, mt_stream_id s);
// Starts a step's count.
static inline void mt_traced_copy_rewind(mt_traced_copy *lk) { lk->bytes[0] = lk->bytes[1] = 0; }

#endif
