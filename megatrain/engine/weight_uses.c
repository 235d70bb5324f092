// weight_uses.c: the order in which one step uses layer weights and the device buffer serving each use:
// forward 0..L-1, then per checkpoint block (last first) its recompute and backward. Consecutive uses of a
// layer share one load; three weight passes (the official code's) reload at every use.
#include <stdlib.h>

#include "engine/weight_ring.h"

static int micro_batch_sequence(const mt_engine_shape *sh, int *seq) {
    int n = 0, L = sh->L, K = sh->s.ckpt_interval, tail = sh->s.weight_passes == 3;
    for (int i = 0; i < L; i++) seq[n++] = i;
    for (int s = (L - 1) / K * K; s >= 0; s -= K) {
        int end = s + K < L ? s + K : L;
        if (!sh->s.keep_activations) // rebuild the block's layer inputs (three passes: its last layer too)
            for (int i = s; i < end - 1 + tail; i++) seq[n++] = i;
        for (int i = end - 1; i >= s; i--) seq[n++] = i;
    }
    return n;
}

mt_status mt_weight_uses_build(const mt_engine_shape *sh, mt_weight_use **out, int *n_out) {
    int per_mb_max = 3 * sh->L;
    int *seq = malloc(sizeof(int) * (size_t)per_mb_max);
    mt_weight_use *uses = malloc(sizeof *uses * (size_t)per_mb_max * (size_t)sh->G);
    int *loaded = calloc((size_t)sh->L, sizeof(int));
    if (!seq || !uses || !loaded) {
        free(seq);
        free(uses);
        free(loaded);
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the weight uses");
    }
    int n_seq = micro_batch_sequence(sh, seq);
    int resident = sh->s.weights_resident;
    int n = 0, ring = 0, prev = -1, prev_buf = -1;
    for (int g = 0; g < sh->G; g++) {
        for (int i = 0; i < n_seq; i++) {
            mt_weight_use *p = &uses[n++];
            p->layer = seq[i];
            if (resident) {
                p->buf = seq[i];
                p->load = !loaded[seq[i]];
                loaded[seq[i]] = 1;
            } else if (seq[i] == prev && sh->s.weight_passes != 3) { // three passes: every use loads
                p->buf = prev_buf;
                p->load = 0;
            } else {
                p->buf = ring;
                p->load = 1;
                ring = (ring + 1) % sh->s.weight_bufs;
            }
            prev = seq[i];
            prev_buf = p->buf;
        }
    }
    free(loaded);
    free(seq);
    *out = uses;
    *n_out = n;
    return MT_OK;
}
