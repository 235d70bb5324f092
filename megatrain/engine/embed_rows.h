// embed_rows.h: the embedding rows a step's forward reads, first: the optimizer pass updates and stages
// those rows (a few thousand of 152k) before the rest, and the forward copies in only them as a compact
// table read through remapped ids. Bitwise the same parameters; the step boundary waits for |rows|, not V.
#ifndef MT_EMBED_ROWS_H
#define MT_EMBED_ROWS_H

#include <stdint.h>

#include "engine/traced_copy.h"
#include "engine/optimizer_worker.h"
#include "engine/parts.h"

typedef struct mt_embed_rows mt_embed_rows;

// Host tables: a mark per vocabulary row and two row lists (nothing when sh->rows_cap is 0).
mt_part_bytes mt_embed_rows_bytes(const mt_engine_shape *sh);
// NULL in *out when rows first is off. `table`: the device embedding the lookup reads.
mt_status mt_embed_rows_create(const mt_engine_shape *sh, mt_model *m, mt_traced_copy *lk, mt_opt_worker *opt,
                               mt_stream_id h2d, void *table, mt_embed_rows **out);
void mt_embed_rows_destroy(mt_embed_rows *x);

// The next step's ids (n_spans spans of span_len ids: what this host's ranks will read),
// kept for the optimizer pass before that step ...
void mt_embed_rows_announce(mt_embed_rows *x, const int32_t *const *spans, int n_spans, size_t span_len);
// ... which is about to start (the last pass has finished): its rows, once. None given, or
// more than its stage holds: the whole embedding is updated first, as without rows first.
void mt_embed_rows_hand_over(mt_embed_rows *x);

// Before a forward over n ids: waits for their rows' update and copies them in (H2D
// stream, the compute stream waits), with compact[i] the place of ids[i]'s row in the
// device table; *compact_used 1. Rows not staged: *compact_used 0 and nothing done (the
// caller loads the whole table). *waited_ms: time waited for the optimizer.
mt_status mt_embed_rows_load(mt_embed_rows *x, const int32_t *ids, size_t n, int32_t *compact, int *compact_used,
                             double *waited_ms);

#endif
