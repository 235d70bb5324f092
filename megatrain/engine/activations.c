// activations.c: sizing and carving the activations (activations.h).
#include "engine/activations.h"

#include <stdlib.h>

#include "engine/rope_table.h"

// x buffers: K-1 block inputs and 2 non-checkpoint outputs (K > 1 only), plus the last
// layer's output and the flowing gradient (the head borrows the layer scratch).
static int n_x(const mt_engine_shape *sh) {
    int K = sh->s.ckpt_interval;
    return (K - 1) + (K > 1 ? 2 : 0) + 2;
}

size_t mt_activations_layer_bytes(const mt_engine_shape *sh) {
    const mt_dims *d = &sh->d;
    return (size_t)n_x(sh) * sh->x_bytes + (size_t)sh->n_acts * mt_dev_round(mt_layer_acts_bytes(d, sh->act)) +
           mt_dev_round(mt_layer_scratch_bytes(d, sh->act));
}

mt_part_bytes mt_activations_bytes(const mt_engine_shape *sh) {
    const mt_dims *d = &sh->d;
    size_t dev =
        mt_activations_layer_bytes(sh) + mt_dev_round((size_t)sh->chunk_rows * sh->c.vocab_size * sh->act_elem_bytes) +
        (sh->rows_cap ? 5 : 4) * mt_dev_round((size_t)d->N * 4) + 2 * mt_dev_round((size_t)d->T * d->HD / 2 * 4);
    size_t stage = (sh->rows_cap ? 4 : 3) * (size_t)sh->G * d->N * 4; // ids, targets, losses (+ compact ids)
    return (mt_part_bytes){.device = dev, .host = stage, .pinned = stage};
}

// RoPE tables: computed once on the host, copied once.
static mt_status rope_tables(const mt_engine_shape *sh, mt_activations *a, mt_devmem *dm) {
    size_t rope_n = (size_t)sh->d.T * sh->d.HD / 2;
    float *hc = malloc(rope_n * 4), *hs = malloc(rope_n * 4);
    if (!hc || !hs) {
        free(hc);
        free(hs);
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate RoPE tables");
    }
    mt_rope_tables(&sh->c, sh->d.T, hc, hs);
    mt_status s = mt_devmem_alloc(dm, rope_n * 4, (void **)&a->rope_cos);
    if (s == MT_OK) s = mt_devmem_alloc(dm, rope_n * 4, (void **)&a->rope_sin);
    if (s == MT_OK) s = mt_backend_copy(a->be, a->rope_cos, hc, rope_n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE);
    if (s == MT_OK) s = mt_backend_copy(a->be, a->rope_sin, hs, rope_n * 4, MT_COPY_H2D, MT_STREAM_COMPUTE);
    if (s == MT_OK) s = mt_backend_stream_sync(a->be, MT_STREAM_COMPUTE);
    free(hc);
    free(hs);
    return s;
}

mt_status mt_activations_create(const mt_engine_shape *sh, mt_backend *be, mt_devmem *dm, mt_dims *d,
                                mt_activations **out) {
    mt_activations *a = calloc(1, sizeof *a);
    if (!a) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the activations");
    *out = a;
    a->be = be;
    a->K = sh->s.ckpt_interval;
    a->G = sh->G;
    a->N = sh->d.N;
    a->n_acts = sh->n_acts;
    a->acts_layer = -1;
    a->chunk_rows = sh->chunk_rows;
    a->blk_in = calloc((size_t)a->K, sizeof *a->blk_in);
    a->acts = calloc((size_t)a->n_acts, sizeof *a->acts);
    if (!a->blk_in || !a->acts) return mt_fail(MT_ERR_MEMORY, "host memory: the activation tables");
    size_t before = dm->bytes, x = (size_t)sh->d.N * sh->d.C * sh->act_elem_bytes;
    for (int i = 1; i < a->K; i++) MT_TRY(mt_devmem_alloc(dm, x, &a->blk_in[i]));
    if (a->K > 1) // outputs that are not checkpoints exist only with K > 1
        for (int i = 0; i < 2; i++) MT_TRY(mt_devmem_alloc(dm, x, &a->x_tmp[i]));
    MT_TRY(mt_devmem_alloc(dm, x, &a->x_final));
    MT_TRY(mt_devmem_alloc(dm, x, &a->dx));
    for (int i = 0; i < a->n_acts; i++) {
        void *mem;
        MT_TRY(mt_devmem_alloc(dm, mt_layer_acts_bytes(&sh->d, sh->act), &mem));
        mt_layer_acts_carve(&sh->d, sh->act, mem, &a->acts[i]);
    }
    void *smem;
    MT_TRY(mt_devmem_alloc(dm, mt_layer_scratch_bytes(&sh->d, sh->act), &smem));
    mt_layer_scratch_carve(&sh->d, sh->act, smem, &a->scratch);
    // The loss head runs while no layer does: its normed input and that input's
    // gradient borrow the layers' (N, C) scratch.
    a->xn = a->scratch.dtmp;
    a->dxn = a->scratch.dln;
    MT_TRY(mt_devmem_alloc(dm, (size_t)a->chunk_rows * sh->c.vocab_size * sh->act_elem_bytes, &a->logits));
    MT_TRY(mt_devmem_alloc(dm, (size_t)sh->d.N * 4, (void **)&a->rstd_final));
    MT_TRY(mt_devmem_alloc(dm, (size_t)sh->d.N * 4, (void **)&a->losses));
    MT_TRY(mt_devmem_alloc(dm, (size_t)sh->d.N * 4, (void **)&a->d_ids));
    MT_TRY(mt_devmem_alloc(dm, (size_t)sh->d.N * 4, (void **)&a->d_tgt));
    if (sh->rows_cap) MT_TRY(mt_devmem_alloc(dm, (size_t)sh->d.N * 4, (void **)&a->d_rows));
    MT_TRY(rope_tables(sh, a, dm));
    MT_TRY(mt_part_check("activations", mt_activations_bytes(sh).device, dm->bytes - before));
    d->rope_cos = a->rope_cos;
    d->rope_sin = a->rope_sin;
    a->stage_bytes = (size_t)sh->G * sh->d.N * 4;
    MT_TRY(mt_backend_host_alloc(be, a->stage_bytes, (void **)&a->h_ids));
    MT_TRY(mt_backend_host_alloc(be, a->stage_bytes, (void **)&a->h_tgt));
    if (sh->rows_cap) MT_TRY(mt_backend_host_alloc(be, a->stage_bytes, (void **)&a->h_rows));
    return mt_backend_host_alloc(be, a->stage_bytes, (void **)&a->h_losses);
}

void mt_activations_destroy(mt_activations *a) {
    if (!a) return;
    if (a->h_ids) mt_backend_host_free(a->be, a->h_ids, a->stage_bytes);
    if (a->h_tgt) mt_backend_host_free(a->be, a->h_tgt, a->stage_bytes);
    if (a->h_losses) mt_backend_host_free(a->be, a->h_losses, a->stage_bytes);
    if (a->h_rows) mt_backend_host_free(a->be, a->h_rows, a->stage_bytes);
    free(a->blk_in);
    free(a->acts);
    free(a);
}
