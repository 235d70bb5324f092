// link.c: span, copy, count.
#include "engine/link.h"

mt_status mt_link_begin(mt_link *lk, mt_stream_id s, mt_lane lane, const char *what, int layer, int *span) {
    return mt_trace_begin_lane(lk->trace, s, lane, what, layer, span);
}

mt_status mt_link_copy(mt_link *lk, void *dst, const void *src, size_t bytes, mt_copy_kind kind, mt_stream_id s) {
    MT_TRY(mt_backend_copy(lk->be, dst, src, bytes, kind, s));
    lk->bytes[kind == MT_COPY_D2H] += (double)bytes;
    return MT_OK;
}

mt_status mt_link_end(mt_link *lk, int span) { return mt_trace_end(lk->trace, span); }

mt_status mt_link_traced_copy(mt_link *lk, mt_lane lane, const char *what, int layer, void *dst, const void *src,
                              size_t bytes, mt_copy_kind kind, mt_stream_id s) {
    int span;
    MT_TRY(mt_link_begin(lk, s, lane, what, layer, &span));
    MT_TRY(mt_link_copy(lk, dst, src, bytes, kind, s));
    return mt_link_end(lk, span);
}
