// traced_copy.c: span, copy, count.
#include "engine/traced_copy.h"

mt_status mt_traced_copy_begin(mt_traced_copy *lk, mt_stream_id s, mt_lane lane, const char *what, int layer,
                               int *span) {
    return mt_trace_begin_lane(lk->trace, s, lane, what, layer, span);
}

mt_status mt_traced_copy_issue(mt_traced_copy *lk, void *dst, const void *src, size_t bytes, mt_copy_kind kind,
                               mt_stream_id s) {
    MT_TRY(mt_backend_copy(lk->be, dst, src, bytes, kind, s));
    lk->bytes[kind == MT_COPY_D2H] += (double)bytes;
    return MT_OK;
}

mt_status mt_traced_copy_end(mt_traced_copy *lk, int span) { return mt_trace_end(lk->trace, span); }

mt_status mt_traced_copy_one(mt_traced_copy *lk, mt_lane lane, const char *what, int layer, void *dst, const void *src,
                             size_t bytes, mt_copy_kind kind, mt_stream_id s) {
    int span;
    MT_TRY(mt_traced_copy_begin(lk, s, lane, what, layer, &span));
    MT_TRY(mt_traced_copy_issue(lk, dst, src, bytes, kind, s));
    return mt_traced_copy_end(lk, span);
}
