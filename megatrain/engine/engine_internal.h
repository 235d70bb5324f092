// engine_internal.h: the engine's state, shared by engine.c (setup), plan.c
// (which buffer each layer use gets), head.c (embedding and loss head) and
// step.c (the schedule itself).
#ifndef MT_ENGINE_INTERNAL_H
#define MT_ENGINE_INTERNAL_H

#include "engine/engine.h"
#include "engine/grad_drain.h"
#include "engine/layer.h"
#include "engine/optimizer_worker.h"
#include "engine/trace.h"

// One use of a layer's weights on the device during a step.
typedef struct {
    int layer;
    int buf;   // device weight buffer
    int load;  // 1 = copy the weights in first; 0 = already there
} mt_plan_entry;

struct mt_engine {
    mt_model *m;
    mt_backend *be;
    mt_engine_opts o;
    mt_dims d;
    mt_dtype act;
    size_t act_size;
    int L;

    // layer weights on the device: a ring (megatrain) or one buffer per layer (resident)
    int n_wbuf;
    void **wbuf;
    mt_event **ev_loaded, **ev_free;
    mt_plan_entry *plan;
    int n_plan, issued, lookahead;
    int issued_piece;        // next piece (submodule copy) of plan[issued]
    int n_pieces;            // pieces per layer load: 1, or one per submodule (zero3)
    size_t pieces[16];       // piece boundaries in elements (n_pieces + 1)
    mt_stream_id h2d, d2h;   // streams carrying weights in and gradients out
    mt_dtype link_dtype;     // gradient type on the link (f32 for zero3)
    void *template_buf;      // copy-bind ablation: the one buffer layers are bound to
    void *link_buf[2];       // zero3: f32 staging of a unit's gradients (double-buffered)
    mt_event *ev_link_free[2];
    int link_next;

    // embedding and head stay resident; their grads too
    void *embed_w, *head_w, *embed_g, *head_g;
    mt_event *ev_embed_loaded, *ev_head_loaded, *ev_embed_gfree, *ev_head_gfree, *ev_ready;

    // layer gradients leave through two device buffers
    void *gbuf[2];
    mt_event *ev_gfree[2];
    int gnext;

    // activations
    int n_ckpt;           // saved layer inputs (megatrain: every K-th layer; resident: all)
    void **ckpt;          // (N,C) each, on the device (not offloaded)
    int ck_offload;       // checkpoints offloaded: ck_host[j] in pinned memory, slot j % 3 on the device
    void **ck_host;
    void *ck_dev[3];
    mt_event *ev_ck_free[3], *ev_ck_out[3], *ev_ck_in[3], *ev_ck_ready;
    void *x_tmp[2];       // forward ping-pong for non-checkpointed outputs
    void **blk_in;        // K inputs of the block being recomputed
    void *x_final, *dx;   // last layer output; gradient flowing backward
    int n_acts;           // 1 (megatrain) or L (resident)
    mt_layer_acts *acts;
    int acts_layer;       // layer whose internals acts[0] holds (megatrain), -1 none
    mt_layer_scratch scratch;
    void *xn, *dxn, *logits;
    float *rstd_final, *losses, *rope_cos, *rope_sin;
    int chunk_rows;       // loss-head rows per chunk (never the full N x V logits)
    float *grad_sum;      // f32 sum of a chunked weight gradient (head, then each layer's MLP), or NULL
    int32_t *d_ids, *d_tgt;
    int32_t *h_ids, *h_tgt; // pinned staging: grad_accum micro-batches
    float *h_losses;
    void **dev_allocs;    // everything dev_alloc'd, for destroy
    int n_dev_allocs;

    mt_trace *trace;
    int load_span;        // trace span of the weight load in flight
    double h2d_bytes, d2h_bytes;
    mt_drain *drain;
    mt_opt_worker *opt;
    double *sumsq;        // per unit, filled by the drain on the last micro-batch
    int step_done;        // steps completed
};

#define MT_UNIT_OF_LAYER(i) (1 + (i))
// Device checkpoint slots when checkpoints are offloaded: one being written, one
// streaming out (forward) or in (backward), one being read.
#define MT_CKPT_SLOTS 3

mt_status mt_plan_build(mt_engine *e);

// weight_stream.c: plan entry idx (layer `layer`) ready on the compute stream, bound to w.
mt_status mt_weights_acquire(mt_engine *e, int idx, int layer, mt_layer_view *w, mt_step_stats *st);
mt_status mt_weights_release(mt_engine *e, int idx);
// Embedding or head: copied to the device once per step, after its update.
mt_status mt_weights_load_resident(mt_engine *e, mt_unit *u, void *dst, mt_event *ev, int unit_index,
                                   mt_step_stats *st);

// checkpoints.c: checkpoint j's device buffer, and the offload hooks (no-ops when on the device).
void *mt_ckpt_dev(mt_engine *e, int j);
mt_status mt_ckpt_before_write(mt_engine *e, int j);
mt_status mt_ckpt_after_write(mt_engine *e, int j);
mt_status mt_ckpt_prefetch(mt_engine *e, int j);
mt_status mt_ckpt_acquire(mt_engine *e, int j);
mt_status mt_ckpt_release(mt_engine *e, int j);
mt_status mt_head_forward_backward(mt_engine *e, int mb, int want_grads, float dscale);
// Rows per loss-head chunk for `budget_bytes` of logits: at least floor_rows, at most N.
int mt_head_chunk_rows(int N, int V, size_t act_size, size_t budget_bytes, int floor_rows);
// Sets e->chunk_rows once everything else is allocated (head.c says how).
mt_status mt_head_size_chunk(mt_engine *e);
mt_status mt_engine_dev_alloc(mt_engine *e, size_t bytes, void **out);

#endif
