// schedule.c: the four schedules as descriptors (schedule.h), and how a
// descriptor takes the user's options. Every schedule runs the same layer
// template, loss head and optimizer, so all four compute the same numbers.
#include "engine/schedule.h"

#include <stdio.h>
#include <string.h>

#include "model/layout.h"

mt_zero3_knobs mt_zero3_defaults(void) {
    return (mt_zero3_knobs){.pin_memory = 1, .overlap_comm = 1, .prefetch_bucket_size = 50000000LL,
                            .param_persistence_threshold = 100000LL, .reduce_bucket_size = 500000000LL,
                            .max_live_parameters = 1000000000LL};
}

// ZeRO-3: whole layers ahead as the prefetch bucket allows (at least the next
// one, whose fetch the bucket then covers only in part), bounded by the live
// parameters; the knobs choose the gradient stream and the pinning.
static void zero3_derive(mt_schedule_desc *d, const mt_config *c) {
    mt_unit_layout le, ll, lh;
    mt_layout_build(c, &le, &ll, &lh);
    long long layer = (long long)ll.numel, ahead = (d->zero3.prefetch_bucket_size + layer - 1) / layer;
    long long live = d->zero3.max_live_parameters / layer;
    if (ahead > 2) ahead = 2;
    if (ahead > live - 1) ahead = live - 1;
    if (ahead < 1) ahead = 1;
    d->weight_bufs = 1 + (int)ahead;
    d->prefetch_elems = d->zero3.prefetch_bucket_size;
    d->grads_on_compute = !d->zero3.overlap_comm;
    d->host_pinned = d->zero3.pin_memory;
}

static const mt_schedule_desc table[] = {
    {.name = "megatrain",
     .summary = "stream layers through a ring of device buffers, checkpoint every K-th input and recompute, "
                "optimizer overlapped with the next step",
     .takes = MT_TAKES_WEIGHT_BUFS | MT_TAKES_CKPT_INTERVAL | MT_TAKES_SERIAL_OPT | MT_TAKES_OFFLOAD_CKPT | MT_TAKES_BIND |
              MT_TAKES_SPECULATIVE,
     .weight_bufs = 2, .prefetch_elems = -1, .ckpt_interval = 1, .host_pinned = 1,
     .optimizer_overlapped = 1},
    {.name = "resident",
     .summary = "every layer resident on the device, all activations kept, optimizer after backward (reference)",
     .takes = MT_TAKES_BIND, .weights_resident = 1, .prefetch_elems = -1, .keep_activations = 1,
     .ckpt_interval = 1, .host_pinned = 1},
    {.name = "zero3",
     .summary = "DeepSpeed ZeRO-3 + CPU offload as a schedule: per-submodule fetch within a prefetch bucket, fp32 "
                "gradients out, per-layer checkpoints, CPU Adam after backward (baselines/ZERO3.md)",
     .takes = MT_TAKES_ZERO3 | MT_TAKES_BIND, .submodule_fetch = 1, .ckpt_interval = 1, .grad_wire_f32 = 1,
     .optimizer_master = 1, .host_bytes_per_param = {18, 18, 16}, .derive = zero3_derive},
    {.name = "naive",
     .summary = "one stream: copy a layer in, compute, copy its gradients out; no prefetch; optimizer after backward",
     .takes = MT_TAKES_CKPT_INTERVAL | MT_TAKES_OFFLOAD_CKPT | MT_TAKES_BIND, .weight_bufs = 1,
     .prefetch_elems = -1, .ckpt_interval = 1, .serial_link = 1, .host_pinned = 1},
};
#define N_SCHEDULES (int)(sizeof table / sizeof *table)

int mt_schedule_count(void) { return N_SCHEDULES; }
const mt_schedule_desc *mt_schedule_at(int i) { return i >= 0 && i < N_SCHEDULES ? &table[i] : NULL; }

mt_status mt_schedule_find(const char *name, const mt_schedule_desc **out) {
    char known[256] = "";
    for (int i = 0; i < N_SCHEDULES; i++) {
        if (!strcmp(name, table[i].name)) {
            *out = &table[i];
            return MT_OK;
        }
        size_t n = strlen(known);
        snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", table[i].name);
    }
    return mt_fail(MT_ERR_ARG, "--schedule: unknown value '%s' (expected one of: %s)", name, known);
}

void mt_schedule_resolve(const mt_schedule_desc *entry, const mt_schedule_opts *o, const mt_config *c,
                         mt_schedule_desc *d) {
    *d = *entry;
    if (d->takes & MT_TAKES_BIND) d->bind = o->bind; // ours bind either way (copy: the official code's ablation)
    if (d->takes & MT_TAKES_WEIGHT_BUFS) d->weight_bufs = o->weight_bufs;
    if (d->takes & MT_TAKES_CKPT_INTERVAL) d->ckpt_interval = o->ckpt_interval;
    if (d->takes & MT_TAKES_SERIAL_OPT) d->optimizer_overlapped = !o->serial_optimizer;
    d->offload_checkpoints = (d->takes & MT_TAKES_OFFLOAD_CKPT) ? o->offload_checkpoints : 0;
    if (d->takes & MT_TAKES_ZERO3) d->zero3 = o->zero3;
    // Speculation needs the overlapped optimizer: its point is that the next forward does not wait.
    d->speculative = (d->takes & MT_TAKES_SPECULATIVE) && d->optimizer_overlapped && o->speculative != 0;
    if (d->derive) d->derive(d, c);
    int L = c->num_layers;
    if (d->weights_resident) d->weight_bufs = L;
    if (d->weight_bufs > L) d->weight_bufs = L;
    d->lookahead = d->weight_bufs - 1; // resident: the weight ring raises it to every use (all loads up front)
}
