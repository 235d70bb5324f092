// host_state.h: the host-authoritative model state. Each unit (embedding,
// layer, head) owns page-aligned host blocks: two pinned ones with what crosses
// the link (the parameters as streamed; their gradients) and a pageable optim
// block with what never does (the Adam moments, the f32 master in mixed mode).
// What AdamW writes (the param and optim blocks) is a pair of blocks the
// speculative step can swap with a spare pair (optimizer_worker.h). Pinning only the link's bytes keeps page-locked
// memory at 4 of the 12 bytes per parameter (paper) and every pin bounded by one unit's weights.
//
//   precision  param   grad   m,v     master   bytes/param
//   paper      bf16    bf16   f32x2   -        12
//   mixed      bf16    bf16   f32x2   f32      16
//   fp32       f32     f32    f32x2   -        16
#ifndef MT_HOST_STATE_H
#define MT_HOST_STATE_H

#include <stddef.h>

#include "backend/backend.h"
#include "engine/host_work.h"
#include "model/layout.h"

typedef enum { MT_PREC_PAPER = 0, MT_PREC_MIXED = 1, MT_PREC_FP32 = 2 } mt_precision;

mt_status mt_precision_parse(const char *s, mt_precision *out);
const char *mt_precision_name(mt_precision p);
mt_dtype mt_precision_wdt(mt_precision p);     // dtype of streamed params and of grads
size_t mt_precision_bytes_per_param(mt_precision p);

// Several hosts (engine/host_shard.h): this host keeps slice h of H of every unit's Adam state and
// f32 master and, with `grads`, of its gradient sum (the hosts' sum lands each slice on its owner
// unit by unit, engine/collective_hosts.c). Those blocks are mapped whole but written only in the
// slice, so the pages outside it never exist; the streamed parameters stay whole and pinned.
typedef struct {
    int H, h;  // H <= 1: the whole state
    int grads; // the gradient sums sliced too (pageable then: the link lands them in slabs)
} mt_state_slice;

typedef struct mt_unit {
    const mt_unit_layout *lay;
    int layer;        // transformer layer index, -1 for embedding/head
    void *param_block; // the parameters as streamed: page-locked unless the schedule says not
    void *grad_block;  // their gradients, page-locked alike (param_bytes too)
    void *optim_block; // pageable, never crosses the link: Adam m, v and the f32 master
    size_t param_bytes, optim_bytes; // of param_block (and grad_block), of optim_block
    void *param;      // wdt, lay->numel elements: what crosses the link
    void *grad;       // wdt, accumulated over micro-batches
    float *m, *v;     // Adam moments
    float *master;    // f32 master weights (mixed) or NULL
} mt_unit;

typedef struct mt_model {
    mt_config cfg;
    mt_precision prec;
    mt_dtype wdt;
    mt_unit_layout lay_embed, lay_layer, lay_head;
    int n_units;      // L + 2: [embed, layer 0 .. L-1, head]
    mt_unit *units;
    mt_backend *be;   // owner of the (pinned) blocks
    mt_host_work host; // the host-side work on this state: real, or priced under virtual time
    int pinned;       // link blocks page-locked (1) or pageable (0)
    const struct mt_model_shards *shards; // several hosts, the state sharded (engine/host_shard.h); else NULL
    mt_state_slice slice; // what of the state this host keeps (H = 1: all of it)
} mt_model;

static inline mt_unit *mt_model_layer(mt_model *m, int i) { return &m->units[1 + i]; }
#define MT_UNIT_OF_LAYER(i) (1 + (i)) // unit index of transformer layer i

// Bytes of one unit's link blocks (parameters and gradients: pinned), of its param
// block alone, and of its optim block, regions page-aligned.
size_t mt_unit_param_bytes(const mt_unit_layout *lay, mt_precision p);
size_t mt_unit_weights_bytes(const mt_unit_layout *lay, mt_precision p);
size_t mt_unit_optim_bytes(const mt_unit_layout *lay, mt_precision p);

// What AdamW reads and writes of a unit, in a param block and an optim block
// (the unit's own, or a spare pair laid out alike).
mt_adamw_state mt_unit_state_in(const mt_unit_layout *lay, mt_precision p, void *param_block, void *optim_block);
// Points u->param, m, v and master into u's param and optim blocks.
void mt_unit_bind(mt_unit *u, mt_precision p);
// Host bytes of the whole model state in precision p, and the pinned part of it.
size_t mt_model_host_bytes(const mt_config *c, mt_precision p);
size_t mt_model_pinned_bytes(const mt_config *c, mt_precision p);
// The same, as one host keeps them when the state is sliced (sl NULL or H <= 1: whole); host 0's
// slices are the longest, so this bounds every host.
size_t mt_model_host_bytes_sliced(const mt_config *c, mt_precision p, const mt_state_slice *sl);
size_t mt_model_pinned_bytes_sliced(const mt_config *c, mt_precision p, const mt_state_slice *sl);
// Refuses with the numbers when `need_bytes` exceeds `avail_bytes` (0 = unknown)
// or, when `pinned`, the locked-memory limit (ulimit -l).
mt_status mt_host_budget_check(size_t need_bytes, size_t avail_bytes, int pinned, const char *what);

// Allocates every unit block, pinned (after the budget check); moments start at zero.
mt_status mt_model_alloc(mt_model *m, const mt_config *c, mt_precision p, mt_backend *be);
// Same, choosing pinned or pageable host memory (zero3's pin_memory = false).
mt_status mt_model_alloc_ex(mt_model *m, const mt_config *c, mt_precision p, mt_backend *be, int pinned);
// Same, keeping only slice sl of the state (NULL: whole): checked and allocated as it is held.
mt_status mt_model_alloc_sliced(mt_model *m, const mt_config *c, mt_precision p, mt_backend *be, int pinned,
                                const mt_state_slice *sl);
void mt_model_free(mt_model *m);

// Iterates over the present tensors of a unit: HF name, view. Returns count.
int mt_unit_tensors(const mt_model *m, const mt_unit *u, mt_tensor_id *ids, int cap);

#endif
