// engine_internal.h: the engine as its parts (parts.h), shared by engine.c
// (creating and destroying them), step.c (the schedule walk) and head.c (the
// embedding and loss head). Each part keeps its own state behind its header.
#ifndef MT_ENGINE_INTERNAL_H
#define MT_ENGINE_INTERNAL_H

#include "engine/activations.h"
#include "engine/ckpt_store.h"
#include "engine/collective.h"
#include "engine/device_optimizer.h"
#include "engine/engine.h"
#include "engine/grad_offload.h"
#include "engine/hosts.h"
#include "engine/layer.h"
#include "engine/traced_copy.h"
#include "engine/optimizer_worker.h"
#include "engine/parts.h"
#include "engine/trace.h"
#include "engine/weight_ring.h"

struct mt_engine {
    mt_model *model;
    mt_backend *be;
    mt_engine_shape sh;
    const mt_schedule_desc *sched; // = &sh.s, the resolved schedule
    mt_dims dims;              // sh.d with the RoPE tables bound
    mt_devmem dev;
    mt_trace *trace;
    mt_traced_copy link;
    mt_opt_worker *opt;
    mt_weight_ring *ring;
    mt_grad_offload *grads;
    mt_ckpt_store *ckpts;
    mt_activations *acts;
    struct mt_devopt *devopt;  // leader only: the units the device updates (device_optimizer.h), or NULL
    int step_done;             // steps completed
    int spec_gated;            // --speculative-step auto: not after a step that clipped or skipped, whose
                               // speculation would all be rolled back (a norm above the clip rarely drops below
                               // it in one step; at random init every step clips)
    int last_clipped;          // the last step clipped or skipped
    // --gpus N: this engine is rank `rank` of n_ranks, on its own backend, over B/N rows of every
    // micro-batch; the host state and the optimizer worker are the leader's (rank 0, what
    // mt_engine_create_ranks returns), shared by all.
    int rank, n_ranks;
    int owns_opt;              // the leader's: it created the optimizer worker the ranks share
    mt_engine **ranks;         // leader only (n_ranks > 1): every rank's engine, itself first
    mt_collective *coll;       // leader only: how the ranks' gradients become the one host gradient
    float *h_losses_all;       // leader only: every rank's token losses, micro-batch-major then rank
    // Which slice of every global micro-batch this rank takes, of how many: rank of n_ranks on one
    // host; with several hosts (hosts.h) host h's rank r takes slice h * n_ranks + r.
    int slice, n_slices;
    mt_hosts *hosts;           // leader only: the other hosts, or NULL
    int shard_opt;             // leader only, with hosts: the optimizer state sharded (host_shard.h)
    float *h_losses_hosts;     // leader only, with hosts: every host's losses (as gathered)
};

// step.c: unit u's updated parameters, every host's slice to every host (the optimizer worker's thread).
mt_status mt_engine_publish_unit(void *engine, int u);

// head.c: final norm + LM head + cross-entropy over micro-batch mb (loss only without want_grads).
mt_status mt_head_forward_backward(mt_engine *e, int mb, int want_grads, float dscale);

#endif
