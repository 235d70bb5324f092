// embed_rows.c: which rows, and the compact table (embed_rows.h).
#include "engine/embed_rows.h"

#include <stdlib.h>

struct mt_embed_rows {
    mt_model *m;
    mt_traced_copy *lk;
    mt_opt_worker *opt;
    mt_stream_id h2d;
    void *table;       // the device embedding tensor
    mt_event *loaded;
    size_t V;
    uint8_t *mark;     // per vocabulary row, cleared after each use
    int32_t *rows;     // scratch: sorted unique rows (at most V)
    int32_t *next;     // the next step's rows, until the optimizer pass before it starts
    size_t n_next;     // 0: none given
};

mt_part_bytes mt_embed_rows_bytes(const mt_engine_shape *sh) {
    size_t V = (size_t)sh->c.vocab_size;
    return (mt_part_bytes){.host = sh->rows_cap ? V + 2 * V * 4 : 0};
}

mt_status mt_embed_rows_create(const mt_engine_shape *sh, mt_model *m, mt_traced_copy *lk, mt_opt_worker *opt,
                               mt_stream_id h2d, void *table, mt_embed_rows **out) {
    *out = NULL;
    if (!sh->rows_cap) return MT_OK;
    mt_embed_rows *x = calloc(1, sizeof *x);
    if (!x) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the embedding's row tables");
    *out = x;
    *x = (mt_embed_rows){.m = m, .lk = lk, .opt = opt, .h2d = h2d, .table = table, .V = (size_t)sh->c.vocab_size};
    x->mark = calloc(x->V, 1);
    x->rows = malloc(x->V * sizeof *x->rows);
    x->next = malloc(x->V * sizeof *x->next);
    if (!x->mark || !x->rows || !x->next)
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the embedding's row tables");
    return mt_backend_event_create(lk->be, &x->loaded);
}

void mt_embed_rows_destroy(mt_embed_rows *x) {
    if (!x) return;
    if (x->loaded) mt_backend_event_destroy(x->lk->be, x->loaded);
    free(x->mark);
    free(x->rows);
    free(x->next);
    free(x);
}

// The sorted unique rows of the spans into x->rows; SIZE_MAX for an id outside the
// vocabulary (no rows then: the lookup's own check is the whole table's path).
static size_t rows_of(mt_embed_rows *x, const int32_t *const *spans, int n_spans, size_t len) {
    int bad = 0;
    for (int s = 0; s < n_spans; s++)
        for (size_t i = 0; i < len; i++) {
            int32_t id = spans[s][i];
            if (id < 0 || (size_t)id >= x->V) bad = 1;
            else x->mark[id] = 1;
        }
    size_t k = 0;
    for (size_t r = 0; r < x->V; r++)
        if (x->mark[r]) x->rows[k++] = (int32_t)r, x->mark[r] = 0;
    return bad ? SIZE_MAX : k;
}

void mt_embed_rows_announce(mt_embed_rows *x, const int32_t *const *spans, int n_spans, size_t span_len) {
    size_t k = rows_of(x, spans, n_spans, span_len);
    x->n_next = k == SIZE_MAX ? 0 : k;
    for (size_t i = 0; i < x->n_next; i++) x->next[i] = x->rows[i];
}

void mt_embed_rows_hand_over(mt_embed_rows *x) {
    mt_opt_worker_rows_next(x->opt, x->next, x->n_next);
    x->n_next = 0;
}

mt_status mt_embed_rows_load(mt_embed_rows *x, const int32_t *ids, size_t n, int32_t *compact, int *compact_used,
                             double *waited_ms) {
    *compact_used = 0;
    *waited_ms = 0;
    size_t k = rows_of(x, &ids, 1, n);
    mt_staged_rows st;
    if (k == SIZE_MAX || !mt_opt_worker_wait_rows(x->opt, x->rows, k, &st, waited_ms)) return MT_OK;
    for (size_t i = 0; i < n; i++) compact[i] = st.slot[ids[i]];
    size_t bytes = st.n_rows * (size_t)x->m->cfg.hidden_size * mt_dtype_size(x->m->wdt);
    MT_TRY(mt_traced_copy_one(x->lk, MT_LANE_H2D, "embedding rows in", -1, x->table, st.stage, bytes, MT_COPY_H2D,
                              x->h2d));
    MT_TRY(mt_backend_event_record(x->lk->be, x->loaded, x->h2d));
    MT_TRY(mt_backend_stream_wait(x->lk->be, MT_STREAM_COMPUTE, x->loaded));
    *compact_used = 1;
    return MT_OK;
}
