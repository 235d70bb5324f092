// zero3_memory.c: memory of DeepSpeed ZeRO-3 with CPU offload of parameters
// and optimizer (offload_param + offload_optimizer to "cpu"; pin_memory as the knob says),
// one GPU, bf16 (or fp32) training, per-layer activation checkpointing.
//
// Host, bytes per parameter (DeepSpeed's own accounting: its estimator
// estimate_zero3_model_states_mem_needs charges 18 B/param for offloaded
// params + optimizer, then multiplies by a 1.5 "buffer factor" we do not apply):
//   bf16 (paper, mixed): fp32 master 4 + Adam m 4 + v 4 + fp32 gradient partition 4
//                        + the bf16 parameter partition it streams 2         = 18
//   fp32:                fp32 params (= master) 4 + m 4 + v 4 + fp32 grads 4 = 16
// DeepSpeed has no bf16-weights-without-master mode, so --precision paper
// costs zero3 the same 18 B/param as mixed. With pin_memory (DeepSpeed's
// default here, as the engine's) all of it is pinned, else none.
//
// GPU, with DeepSpeed's knobs (elements; defaults stage3_prefetch_bucket_size 5e7,
// stage3_max_live_parameters 1e9, reduce_bucket_size 5e8, stage3_param_persistence_threshold 1e5):
//   weights = persistent params (tensors under the threshold: norms, biases) of every layer
//           + live params min(max_live, largest module: a layer, the embedding or the head)
//           + one prefetch bucket
//   grads   = reduce bucket min(reduce_bucket, N) + the full gradient of the largest module
//             (autograd writes it before the hook copies it into the bucket)
//   activations = what our engine keeps with K = 1 (every layer input + one
//             layer's internals + scratch + chunked loss head): the same kernels run.
#include "engine/engine.h"
#include "model/layout.h"
#include "planner/planner.h"

static size_t persistent_numel(const mt_unit_layout *lay, long long threshold) {
    size_t n = 0;
    for (int t = 0; t < MT_T_COUNT; t++)
        if (lay->t[t].present && (long long)lay->t[t].numel < threshold) n += lay->t[t].numel;
    return n;
}

void mt_zero3_memory(const mt_config *c, const mt_plan_input *in, mt_plan_memory *out) {
    mt_unit_layout le, ll, lh;
    mt_layout_build(c, &le, &ll, &lh);
    int fp32 = in->prec == MT_PREC_FP32;
    const mt_zero3_knobs *k = &in->eng.sched.zero3;
    size_t ws = fp32 ? 4 : 2, bpp = (size_t)in->eng.schedule->host_bytes_per_param[in->prec];
    long long N = mt_config_params_total(c);

    // GPU: what our zero3 schedule allocates (it is what runs, out->engine); DeepSpeed's
    // own footprint (persistent + live + prefetch bucket, reduce bucket) is reported beside it.
    const mt_engine_footprint *e = &out->engine;

    // Module sizes as DeepSpeed sees them (unpadded): a layer, the embedding, the head.
    size_t PL = (size_t)mt_config_params_per_layer(c), PE = (size_t)c->vocab_size * c->hidden_size;
    size_t PH = (size_t)N - (size_t)c->num_layers * PL - PE, largest = PL;
    if (PE > largest) largest = PE;
    if (PH > largest) largest = PH;
    size_t live = (long long)largest < k->max_live_parameters ? largest : (size_t)k->max_live_parameters;
    size_t persistent = (size_t)c->num_layers * persistent_numel(&ll, k->param_persistence_threshold) +
                        persistent_numel(&le, k->param_persistence_threshold) +
                        persistent_numel(&lh, k->param_persistence_threshold);
    size_t reduce = N < k->reduce_bucket_size ? (size_t)N : (size_t)k->reduce_bucket_size;

    out->deepspeed_gpu_bytes = (persistent + live + (size_t)k->prefetch_bucket_size) * ws + (reduce + largest) * ws +
                               e->checkpoints.device + e->activations.device;

    out->host_state_bytes = (size_t)N * bpp;
    out->host_staging_bytes = 3 * (size_t)in->eng.grad_accum * (size_t)in->eng.B * in->eng.T * 4; // token staging, as the engine
    out->host_bytes = out->host_state_bytes + out->host_staging_bytes;
    out->pinned_bytes = k->pin_memory ? out->host_bytes : 0; // all of it or nothing, as pin_memory says
    out->host_bytes_per_param = (double)bpp;
    out->host_accounting =
        fp32 ? "zero3 (DeepSpeed ZeRO-3 offload, fp32): params 4 + m 4 + v 4 + fp32 grads 4 = 16 B/param"
             : "zero3 (DeepSpeed ZeRO-3 offload, bf16): fp32 master 4 + m 4 + v 4 + fp32 grads 4 + bf16 param copy 2 = "
               "18 B/param (DeepSpeed's estimator adds a x1.5 buffer factor: see deepspeed_estimator_host_bytes)";
}
