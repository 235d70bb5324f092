// activations.h: the device activations of a pass and the step's token
// staging. Per pass: the K-1 rebuilt inputs of the block in backward, two
// ping-pong outputs of layers that are not checkpoints (K > 1), the last
// layer's output and the gradient flowing backward; one layer's internals (or
// every layer's when activations are kept); the layers' shared scratch; the
// loss head's logits chunk and per-token arrays; the RoPE tables. On the host,
// pinned: the step's token ids, targets and losses (G micro-batches).
#ifndef MT_ACTIVATIONS_H
#define MT_ACTIVATIONS_H

#include "engine/parts.h"

typedef struct {
    mt_backend *be;
    int K, G, N;
    void **blk_in;           // K inputs of the block being recomputed ([0] is the checkpoint)
    void *x_tmp[2];          // forward ping-pong for outputs that are not checkpoints
    void *x_final, *dx;      // last layer output; gradient flowing backward
    int n_acts;              // 1, or L when activations are kept
    mt_layer_acts *acts;
    int acts_layer;          // layer whose internals acts[0] holds (one set), -1 none
    mt_layer_scratch scratch;
    void *xn, *dxn;          // loss head: normed input and its gradient (borrow the layer scratch)
    void *logits;            // one chunk of chunk_rows rows
    int chunk_rows;
    float *rstd_final, *losses, *rope_cos, *rope_sin;
    int32_t *d_ids, *d_tgt;
    int32_t *h_ids, *h_tgt;  // pinned staging: G micro-batches
    int32_t *d_rows, *h_rows;// rows first (embed_rows.h): the ids' places in the compact embedding (or NULL)
    int rows_used;           // this pass's lookup reads the compact table through them
    float *h_losses;
    size_t stage_bytes;
} mt_activations;

mt_part_bytes mt_activations_bytes(const mt_engine_shape *sh);
// The device bytes allocated before the loss head's (the layers' buffers and scratch).
size_t mt_activations_layer_bytes(const mt_engine_shape *sh);
// Also copies the RoPE tables in (compute stream) and points sh-derived dims at them (d->rope_*).
mt_status mt_activations_create(const mt_engine_shape *sh, mt_backend *be, mt_devmem *dm, mt_dims *d,
                                mt_activations **out);
void mt_activations_destroy(mt_activations *a);

#endif
