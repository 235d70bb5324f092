// plan.c: the order in which one step uses layer weights, and which device
// buffer serves each use. megatrain: forward 0..L-1, then per checkpoint block
// (last first) the recompute of the block's inputs and the backward in reverse;
// consecutive uses of one layer share a buffer and load once. resident: every
// layer has its own buffer and loads once per step.
#include <stdlib.h>

#include "engine/engine_internal.h"

static int micro_batch_sequence(const mt_engine *e, int *seq) {
    int n = 0, L = e->L, K = e->K;
    for (int i = 0; i < L; i++) seq[n++] = i;
    // (zero3 and naive checkpoint like megatrain; zero3 with K = 1, as DeepSpeed's per-layer checkpointing)
    for (int s = (L - 1) / K * K; s >= 0; s -= K) {
        int end = s + K < L ? s + K : L;
        if (!e->s.keep_activations)
            for (int i = s; i < end - 1; i++) seq[n++] = i; // rebuild the block's layer inputs
        for (int i = end - 1; i >= s; i--) seq[n++] = i;
    }
    return n;
}

mt_status mt_plan_build(mt_engine *e) {
    int per_mb_max = 3 * e->L;
    int *seq = malloc(sizeof(int) * (size_t)per_mb_max);
    e->plan = malloc(sizeof *e->plan * (size_t)per_mb_max * (size_t)e->o.grad_accum);
    if (!seq || !e->plan) {
        free(seq);
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the weight plan");
    }
    int n_seq = micro_batch_sequence(e, seq);
    int resident = e->s.weights_resident;
    int *loaded = calloc((size_t)e->L, sizeof(int));
    int n = 0, ring = 0, prev = -1, prev_buf = -1;
    for (int g = 0; g < e->o.grad_accum; g++) {
        for (int i = 0; i < n_seq; i++) {
            mt_plan_entry *p = &e->plan[n++];
            p->layer = seq[i];
            if (resident) {
                p->buf = seq[i];
                p->load = !loaded[seq[i]];
                loaded[seq[i]] = 1;
            } else if (seq[i] == prev) {
                p->buf = prev_buf;
                p->load = 0;
            } else {
                p->buf = ring;
                p->load = 1;
                ring = (ring + 1) % e->n_wbuf;
            }
            prev = seq[i];
            prev_buf = p->buf;
        }
    }
    free(loaded);
    free(seq);
    e->n_plan = n;
    if (resident) e->lookahead = n;
    return MT_OK;
}
