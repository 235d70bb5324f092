// engine.c: validating the options and creating the engine's parts.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes_text.h"
#include "core/mem_limits.h"
#include "engine/engine_internal.h"
#include "engine/host_shard.h"

void mt_engine_opts_defaults(mt_engine_opts *o) {
    mt_engine_opts d = {.B = 4, .T = 64, .grad_accum = 1, .grad_slabs = 4, .mlp_rows = 8192,
                        .sched = {.weight_bufs = 2, .ckpt_interval = 1, .offload_checkpoints = -1,
                                  .bind = MT_BIND_POINTER, .zero3 = mt_zero3_defaults(), .speculative = -1,
                                  .rows_first = -1}};
    mt_schedule_find("megatrain", &d.schedule);
    *o = d;
}

mt_status mt_engine_opts_check_speculative(const mt_engine_opts *o) {
    if (o->sched.speculative < -1 || o->sched.speculative > 1)
        return mt_fail(MT_ERR_ARG, "--speculative-step: expected true, false or auto");
    if (o->sched.speculative == 1 && !(o->schedule->takes & MT_TAKES_SPECULATIVE))
        return mt_fail(MT_ERR_ARG, "--speculative-step true: the %s schedule runs its optimizer after the backward, "
                                   "with nothing to overlap; it applies to --schedule megatrain",
                       o->schedule->name);
    if (o->sched.speculative == 1 && o->sched.serial_optimizer)
        return mt_fail(MT_ERR_ARG, "--speculative-step true with --serial-optimizer: speculation runs the optimizer "
                                   "under the backward, the serial optimizer after it; drop one");
    return MT_OK;
}

mt_status mt_engine_opts_check_rows_first(const mt_engine_opts *o) {
    if (o->sched.rows_first < -1 || o->sched.rows_first > 1)
        return mt_fail(MT_ERR_ARG, "--embedding-rows-first: expected true, false or auto");
    if (o->sched.rows_first == 1 && !(o->schedule->takes & MT_TAKES_ROWS_FIRST))
        return mt_fail(MT_ERR_ARG, "--embedding-rows-first true: the %s schedule updates the embedding whole; it "
                                   "applies to --schedule megatrain", o->schedule->name);
    if (o->sched.rows_first == 1 && o->sched.serial_optimizer)
        return mt_fail(MT_ERR_ARG, "--embedding-rows-first true with --serial-optimizer: the serial optimizer finishes "
                                   "before the next forward, so there is nothing to put first; drop one");
    return MT_OK;
}

mt_status mt_engine_opts_check_update_parts(const mt_engine_opts *o) {
    int n = o->sched.update_parts;
    if (n < 0 || n > MT_MAX_SUBMODULES)
        return mt_fail(MT_ERR_ARG, "--update-parts %d: expected 1 (whole units) to %d", n, MT_MAX_SUBMODULES);
    if (n > 0 && !(o->schedule->takes & MT_TAKES_UPDATE_PARTS))
        return mt_fail(MT_ERR_ARG, "--update-parts: the %s schedule updates whole units; it applies to --schedule "
                                   "megatrain", o->schedule->name);
    return MT_OK;
}

mt_status mt_engine_opts_check_recompute(const mt_engine_opts *o) {
    mt_recompute r = o->sched.recompute;
    if (r < MT_RECOMPUTE_AUTO || r > MT_RECOMPUTE_NONE)
        return mt_fail(MT_ERR_ARG, "--recompute: expected full, mlp, norms, swiglu, none or auto");
    if (r != MT_RECOMPUTE_FULL && !(o->schedule->takes & MT_TAKES_RECOMPUTE))
        return mt_fail(MT_ERR_ARG, "--recompute %s: the %s schedule fixes what it keeps; it applies to --schedule "
                                   "megatrain and naive", mt_recompute_name(r), o->schedule->name);
    if (r > MT_RECOMPUTE_FULL && o->sched.ckpt_interval > 1)
        return mt_fail(MT_ERR_ARG,
                       "--recompute %s keeps every layer's input; --checkpoint-interval %d contradicts it "
                       "(drop one, or --recompute full|auto)",
                       mt_recompute_name(r), o->sched.ckpt_interval);
    if (r > MT_RECOMPUTE_FULL && o->sched.offload_checkpoints == 1)
        return mt_fail(MT_ERR_ARG, "--recompute %s keeps every layer's input on the device; --offload-checkpoints "
                                   "true contradicts it (drop one, or --recompute full|auto)", mt_recompute_name(r));
    return MT_OK;
}

mt_status mt_grad_sum_parse(const char *s, mt_grad_sum *out) {
    if (!strcmp(s, "auto")) *out = MT_GRAD_SUM_AUTO;
    else if (!strcmp(s, "f32")) *out = MT_GRAD_SUM_F32;
    else if (!strcmp(s, "bf16")) *out = MT_GRAD_SUM_BF16;
    else return mt_fail(MT_ERR_ARG, "--grad-accum-dtype: unknown value '%s' (expected auto, f32 or bf16)", s);
    return MT_OK;
}

const char *mt_grad_sum_name(mt_grad_sum g) {
    return g == MT_GRAD_SUM_F32 ? "f32" : g == MT_GRAD_SUM_BF16 ? "bf16" : "auto";
}

mt_status mt_engine_opts_validate(const mt_engine_opts *o, const mt_config *c) {
    if (!o->schedule) return mt_fail(MT_ERR_ARG, "--schedule: none given");
    if (o->B <= 0) return mt_fail(MT_ERR_ARG, "--batch: must be positive (got %d)", o->B);
    if (o->T <= 0) return mt_fail(MT_ERR_ARG, "--seq-len: must be positive (got %d)", o->T);
    if (o->grad_accum <= 0) return mt_fail(MT_ERR_ARG, "--grad-accum: must be positive (got %d)", o->grad_accum);
    if ((long long)o->B * o->T > 1LL << 30)
        return mt_fail(MT_ERR_ARG,
                       "--batch x --seq-len: %lld tokens per micro-batch is too many (the engine's limit is 2^30)",
                       (long long)o->B * o->T);
    if (o->sched.ckpt_interval <= 0 || o->sched.ckpt_interval > c->num_layers)
        return mt_fail(MT_ERR_ARG, "--checkpoint-interval: must be in 1..%d (the layer count), got %d", c->num_layers,
                       o->sched.ckpt_interval);
    // 1: no prefetch.
    if ((o->schedule->takes & MT_TAKES_WEIGHT_BUFS) && (o->sched.weight_bufs < 1 || o->sched.weight_bufs > 3))
        return mt_fail(MT_ERR_ARG, "--weight-buffers: must be 1, 2 or 3 (got %d)", o->sched.weight_bufs);
    if (o->grad_slabs < 1 || o->grad_slabs > 64)
        return mt_fail(MT_ERR_ARG, "--grad-slabs: must be in 1..64 (got %d)", o->grad_slabs);
    if (o->mlp_rows < 0) return mt_fail(MT_ERR_ARG, "--mlp-chunk: must be >= 0 (got %d)", o->mlp_rows);
    if (o->grad_sum != MT_GRAD_SUM_AUTO && o->grad_sum != MT_GRAD_SUM_F32 && o->grad_sum != MT_GRAD_SUM_BF16)
        return mt_fail(MT_ERR_ARG, "--grad-accum-dtype: expected auto, f32 or bf16");
    if (o->sched.offload_checkpoints < -1 || o->sched.offload_checkpoints > 1)
        return mt_fail(MT_ERR_ARG, "--offload-checkpoints: expected true, false or auto");
    MT_TRY(mt_engine_opts_check_speculative(o));
    MT_TRY(mt_engine_opts_check_rows_first(o));
    MT_TRY(mt_engine_opts_check_update_parts(o));
    MT_TRY(mt_engine_opts_check_recompute(o));
    if (o->schedule->takes & MT_TAKES_ZERO3) {
        const mt_zero3_knobs *z = &o->sched.zero3;
        if (z->prefetch_bucket_size <= 0 || z->param_persistence_threshold < 0 || z->reduce_bucket_size <= 0 ||
            z->max_live_parameters <= 0)
            return mt_fail(MT_ERR_ARG, "--zero3-*: bucket sizes and max live parameters must be positive");
    }
    return MT_OK;
}

// The host memory the run may plan with: MemAvailable (or the simulated machine's),
// less the device plan where the device's memory is host memory (the CPU backend),
// so the speculative window sized against it leaves room for the device buffers.
static size_t host_free_for(const mt_config *c, mt_precision p, const mt_engine_opts *o, mt_backend *be,
                            const mt_device_info *info) {
    if (o->host_free) return o->host_free;
    size_t avail = info->host_mem_avail_bytes;
    if (!avail || mt_backend_has(be, MT_CAP_DEVICE_MEMORY)) return avail;
    mt_engine_footprint fp = mt_engine_footprint_of(c, p, o, be->act_dtype, info->mem_free_bytes, mt_backend_caps(be));
    return fp.device_bytes < avail ? avail - fp.device_bytes : 1; // 1: no room (0 would mean "no limit")
}

mt_status mt_engine_check_host_memory(const mt_config *c, mt_precision p, const mt_engine_opts *opts, mt_backend *be) {
    return mt_engine_check_host_memory_ranks(c, p, opts, be, 1, NULL);
}

mt_status mt_engine_check_host_memory_ranks(const mt_config *c, mt_precision p, const mt_engine_opts *opts,
                                            mt_backend *be, int n_ranks, const mt_state_slice *sl) {
    MT_TRY(mt_engine_check_ranks(opts->B, n_ranks));
    mt_engine_opts o = *opts;
    o.B /= n_ranks; // each rank's engine: its rows of every micro-batch
    MT_TRY(mt_engine_opts_validate(&o, c));
    mt_device_info info;
    MT_TRY(mt_backend_device_info(be, &info));
    size_t avail = info.host_mem_avail_bytes;
    mt_mem_room room = {.what = "the simulated machine's host memory"};
    if (!mt_backend_has(be, MT_CAP_VIRTUAL_TIME)) { // real memory: the tightest limit, the threads of every rank kept
        mt_mem_room_now(mt_mem_engine_reserve_bytes(n_ranks), &room);
        if (room.bytes != SIZE_MAX) avail = info.host_mem_avail_bytes = room.bytes ? room.bytes : 1;
    }
    if (!avail) return MT_OK; // unknown: nothing to check against
    if (!room.what[0]) snprintf(room.what, sizeof room.what, "free pages");
    o.host_free = host_free_for(c, p, &o, be, &info);
    mt_engine_footprint fp = mt_engine_footprint_of(c, p, &o, be->act_dtype, info.mem_free_bytes, mt_backend_caps(be));
    int device_on_host = !mt_backend_has(be, MT_CAP_DEVICE_MEMORY);
    // One model state and one optimizer (the leader's); every rank its own slabs, staging and device buffers.
    size_t per_rank = fp.host_bytes - fp.state.host - fp.optimizer.host, R = (size_t)n_ranks;
    size_t state = sl && sl->H > 1 ? mt_model_host_bytes_sliced(c, p, sl) : fp.state.host;
    size_t need = state + fp.optimizer.host + R * per_rank + (device_on_host ? R * fp.device_bytes : 0);
    if (need <= avail) return MT_OK;
    char ranks[48] = "";
    if (n_ranks > 1) snprintf(ranks, sizeof ranks, " for %d ranks", n_ranks);
    return mt_fail(
        MT_ERR_MEMORY,
        "host memory: the run needs %s (model state %s, pinned slabs and staging %s%s, speculative "
        "spare blocks %s%s%s) but %s is available (%s); nothing was allocated. HINT: %sa smaller model, "
        "--batch, --seq-len or --grad-accum (a step's token ids are staged whole), --precision paper, or "
        "`megatrain plan`",
        mt_bytes_format(need).s, mt_bytes_format(state).s, mt_bytes_format(R * per_rank).s, ranks,
        mt_bytes_format(fp.optimizer.host).s,
        device_on_host ? ", device buffers in host memory " : ", device buffers not counted ",
        mt_bytes_format(device_on_host ? R * fp.device_bytes : 0).s, mt_bytes_format(avail).s, room.what,
        room.address_space ? "raise the limit (ulimit -v / -d unlimited), " : "");
}

static void grad_final(void *ctx, int unit, double sumsq) { mt_opt_worker_grad_final(ctx, unit, sumsq); }

// The split (device_optimizer.h): N units, or with auto those the device's spare memory holds
// after the plan at its floor (a sixteenth of what is free kept back); auto is off where the
// "device" is host memory (cpu): the host would only update the same state through another
// seam. Chosen before the parts are sized, which then plan in what the split leaves.
static mt_status devopt_choose(mt_model *m, mt_backend *be, const mt_engine_opts *o, size_t dev_free,
                               unsigned char *on, int *n, size_t *bytes) {
    int want = o->device_optimizer;
    *n = 0, *bytes = 0;
    if (want == MT_DEVOPT_OFF || (want == MT_DEVOPT_AUTO && !mt_backend_has(be, MT_CAP_DEVICE_MEMORY))) return MT_OK;
    size_t plan = mt_engine_footprint_of(&m->cfg, m->prec, o, be->act_dtype, dev_free, 0).device_bytes;
    size_t keep = dev_free / 16, spare = dev_free > plan + keep ? dev_free - plan - keep : 0;
    *n = mt_devopt_choose(&m->cfg, m->prec, want, spare, on, bytes);
    if (want > 0 && dev_free && *bytes > spare)
        return mt_fail(MT_ERR_MEMORY, "--device-optimizer %d: the units' state needs %s of device memory, %s is "
                                      "spare after the plan; give fewer units or auto", want,
                       mt_bytes_format(*bytes).s, mt_bytes_format(spare).s);
    return MT_OK;
}

static mt_status create_devopt(mt_engine *e, const unsigned char *on, int n) {
    if (!n) return MT_OK;
    MT_TRY(mt_devopt_create(e->model, e->be, on, mt_schedule_h2d_stream(&e->sh.s), &e->devopt));
    mt_opt_worker_set_device_units(e->opt, mt_devopt_mask(e->devopt));
    mt_weight_ring_set_devopt(e->ring, e->devopt);
    mt_grad_offload_set_devopt(e->grads, e->devopt);
    return MT_OK;
}

// One rank's engine on backend `be` (the only one for --gpus 1); `leader` NULL: it is the
// leader and creates the optimizer worker, else it shares the leader's.
static mt_status create_rank(mt_model *m, mt_backend *be, const mt_engine_opts *opts, mt_engine *leader, int rank,
                             int n_ranks, mt_engine **out) {
    const mt_config *c = &m->cfg;
    *out = NULL;
    MT_TRY(mt_engine_opts_validate(opts, c));

    mt_device_info info;
    MT_TRY(mt_backend_device_info(be, &info));
    unsigned char on_dev[m->n_units];
    int n_dev = 0;
    size_t dev_bytes = 0;
    if (!leader && n_ranks == 1) MT_TRY(devopt_choose(m, be, opts, info.mem_free_bytes, on_dev, &n_dev, &dev_bytes));
    // The parts plan in the rest.
    info.mem_free_bytes -= info.mem_free_bytes > dev_bytes ? dev_bytes : info.mem_free_bytes;
    mt_engine_opts oo = *opts, *o = &oo;
    o->host_free = host_free_for(c, m->prec, opts, be, &info); // the speculative window is sized against it
    if (leader) o->keep_trace = 0; // --trace writes the leader's timeline; the others' would only grow
    mt_engine *e = calloc(1, sizeof *e);
    if (!e) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the engine");
    *out = e;
    e->model = m;
    e->be = be;
    e->rank = e->slice = rank;
    e->n_ranks = e->n_slices = n_ranks;
    mt_engine_shape_init(&e->sh, c, m->prec, be->act_dtype, o, info.mem_free_bytes, mt_backend_caps(be));
    e->sched = &e->sh.s;
    e->spec_gated = o->sched.speculative < 0;
    e->dims = e->sh.d;
    e->dev.be = be;
    // What the configuration needs (the loss head at its floor) must fit; the head then grows into what is left.
    mt_engine_footprint fp = mt_engine_footprint_of(c, m->prec, o, be->act_dtype, info.mem_free_bytes, 0);
    if (info.mem_free_bytes && fp.device_bytes > info.mem_free_bytes)
        return mt_fail(MT_ERR_MEMORY,
                       "device memory: batch %d x seq %d with the %s schedule needs %s but %s has %s free; "
                       "lower --batch or --seq-len",
                       o->B, o->T, e->sched->name, mt_bytes_format(fp.device_bytes).s, info.name,
                       mt_bytes_format(info.mem_free_bytes).s);
    if (e->sched->offload_checkpoints)
        MT_TRY(mt_host_budget_check(fp.checkpoints.host + fp.state.host, info.host_mem_avail_bytes, 0,
                                    "offloaded checkpoints with the model state"));

    MT_TRY(mt_trace_create(be, &m->host, o->keep_trace, &e->trace));
    e->link = (mt_traced_copy){.be = be, .trace = e->trace};
    if (leader) {
        e->opt = leader->opt;
    } else {
        MT_TRY(mt_opt_worker_create(m, e->sh.spec_window, e->sh.rows_cap, e->sh.s.update_parts, &e->opt));
        e->owns_opt = 1;
        mt_opt_worker_set_trace(e->opt, e->trace);
    }
    MT_TRY(mt_weight_ring_create(&e->sh, m, &e->link, e->opt, &e->dev, &e->ring));
    MT_TRY(mt_grad_offload_create(&e->sh, m, &e->link, &e->dev, &e->grads));
    if (!leader && e->sh.spec_window) mt_grad_offload_on_final(e->grads, grad_final, e->opt);
    MT_TRY(mt_ckpt_store_create(&e->sh, be, &e->link, &e->dev, &e->ckpts));
    MT_TRY(mt_activations_create(&e->sh, be, &e->dev, &e->dims, &e->acts));
    // The layers' MLP and the head sum chunked gradients there.
    e->acts->scratch.grad_sum = mt_grad_offload_sum(e->grads);
    MT_TRY(create_devopt(e, on_dev, n_dev));
    return MT_OK;
}

mt_status mt_engine_create(mt_model *m, mt_backend *be, const mt_engine_opts *opts, mt_engine **out) {
    return mt_engine_create_ranks(m, &be, 1, opts, out);
}

mt_status mt_engine_check_ranks(int B, int n_ranks) {
    if (n_ranks < 1) return mt_fail(MT_ERR_ARG, "--gpus: must be at least 1 (got %d)", n_ranks);
    if (B % n_ranks)
        return mt_fail(MT_ERR_ARG, "--batch %d is not divisible by --gpus %d: each device takes B/N rows of every "
                                   "micro-batch (give a multiple of %d)", B, n_ranks, n_ranks);
    return MT_OK;
}

mt_status mt_engine_create_ranks(mt_model *m, mt_backend **bes, int n_ranks, const mt_engine_opts *opts,
                                 mt_engine **out) {
    *out = NULL;
    MT_TRY(mt_engine_check_ranks(opts->B, n_ranks));
    if (n_ranks > 1 && opts->device_optimizer > 0)
        return mt_fail(MT_ERR_ARG, "--device-optimizer %d with --gpus %d: the split updates one device's units; "
                                   "give --device-optimizer off or auto (off for several GPUs)", opts->device_optimizer,
                       n_ranks);
    if (n_ranks == 1) return create_rank(m, bes[0], opts, NULL, 0, 1, out);
    mt_engine_opts ro = *opts;
    ro.B = opts->B / n_ranks; // each rank's rows of every micro-batch
    mt_collective *coll;
    MT_TRY(mt_collective_create(bes, n_ranks, m->n_units, &coll));
    if (coll->bind) {
        mt_status s = coll->bind(coll, 0);
        if (s != MT_OK) {
            mt_collective_destroy(coll);
            return s;
        }
    }
    mt_engine *lead;
    mt_status s = create_rank(m, bes[0], &ro, NULL, 0, n_ranks, &lead);
    *out = lead; // the caller destroys what was made, whatever failed
    if (!lead) {
        mt_collective_destroy(coll);
        return s;
    }
    lead->coll = coll;
    lead->ranks = calloc((size_t)n_ranks, sizeof *lead->ranks);
    lead->h_losses_all = malloc((size_t)lead->sh.G * n_ranks * lead->dims.N * sizeof(float));
    if (!lead->ranks || !lead->h_losses_all)
        return s != MT_OK ? s : mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the ranks' tables");
    lead->ranks[0] = lead;
    MT_TRY(s);
    mt_grad_offload_join(lead->grads, coll, 0, lead->grads);
    for (int r = 1; r < n_ranks; r++) {
        if (coll->bind) MT_TRY(coll->bind(coll, r)); // the rank's buffers on its own device
        MT_TRY(create_rank(m, bes[r], &ro, lead, r, n_ranks, &lead->ranks[r]));
        mt_grad_offload_join(lead->ranks[r]->grads, coll, r, lead->grads);
    }
    return coll->bind ? coll->bind(coll, 0) : MT_OK;
}

static void hosts_release(mt_engine *e) {
    for (int u = 0; e->shard_opt && u < e->model->n_units; u++)
        mt_host_shard_release(&e->model->units[u], e->hosts->n, e->hosts->rank);
}

mt_status mt_engine_shard_optimizer(mt_engine *e) {
    if (!e->hosts || e->hosts->n == 1) return MT_OK;
    MT_TRY(mt_engine_finish(e)); // no update in flight over the pages given back
    e->shard_opt = 1;
    // Where MPI allows the worker its own communicator, it gathers each unit as it updates it,
    // under the next forward; else the step gathers them all after the update (step.c).
    mt_opt_worker_set_slice(e->opt, e->hosts->n, e->hosts->rank,
                            e->hosts->all_gather_worker ? mt_engine_publish_unit : NULL, e);
    hosts_release(e);
    if (e->model->slice.grads) { // each unit's micro-batch summed across hosts as it lands (collective_hosts.c)
        if (e->n_ranks > 1 || e->model->slice.H != e->hosts->n)
            return mt_fail(MT_ERR_ARG, "several hosts: the gradients are sliced for one rank per host over %d hosts",
                           e->model->slice.H);
        MT_TRY(mt_collective_hosts_create(e->hosts, &e->coll));
        mt_grad_offload_join(e->grads, e->coll, 0, e->grads);
    }
    return MT_OK;
}

mt_grad_sum mt_engine_grad_sum(const mt_engine *e) { return e->sh.grad_sum_f32 ? MT_GRAD_SUM_F32 : MT_GRAD_SUM_BF16; }

mt_recompute mt_engine_recompute(const mt_engine *e) { return e->sh.s.recompute; }

int mt_engine_device_units(const mt_engine *e, size_t *bytes) {
    if (bytes) *bytes = mt_devopt_bytes(e->devopt);
    return mt_devopt_count(e->devopt);
}

mt_status mt_engine_set_hosts(mt_engine *e, mt_hosts *h) {
    if (!h || h->n == 1) return MT_OK;
    if (e->devopt)
        return mt_fail(MT_ERR_ARG, "several hosts: the hosts sum every unit's gradient on the host, and the device's "
                                   "units keep theirs on the device; run with --device-optimizer off");
    if (e->sched->speculative || e->sh.spec_window)
        return mt_fail(MT_ERR_ARG, "several hosts: the speculative step would update with one host's gradients "
                                   "before the hosts' sum; run with --speculative-step false");
    size_t n = (size_t)e->sh.G * e->n_ranks * e->dims.N;
    free(e->h_losses_hosts);
    if (!(e->h_losses_hosts = malloc(n * h->n * sizeof(float))))
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the hosts' losses");
    free(e->h_losses_all); // now every host's, not only this host's ranks'
    if (!(e->h_losses_all = malloc(n * h->n * sizeof(float))))
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the hosts' losses");
    e->hosts = h;
    for (int r = 0; r < e->n_ranks; r++) {
        mt_engine *x = e->ranks ? e->ranks[r] : e;
        x->slice = h->rank * e->n_ranks + r;
        x->n_slices = h->n * e->n_ranks;
    }
    return MT_OK;
}

// One rank's parts; the optimizer worker only by the leader that made it (already stopped).
static void destroy_rank(mt_engine *e) {
    if (!e) return;
    mt_backend *be = e->be;
    for (int s = 0; s < MT_NUM_STREAMS; s++) mt_backend_stream_sync(be, (mt_stream_id)s);
    mt_grad_offload_destroy(e->grads); // its drain thread before the trace it writes to
    mt_trace_destroy(e->trace);
    mt_devmem_free_all(&e->dev);
    mt_weight_ring_destroy(e->ring);
    mt_ckpt_store_destroy(e->ckpts);
    mt_activations_destroy(e->acts);
    free(e);
}

void mt_engine_destroy(mt_engine *e) {
    if (!e) return;
    if (e->opt && e->owns_opt) mt_opt_worker_destroy(e->opt); // first: no update runs while the parts go
    mt_devopt_destroy(e->devopt);
    mt_collective *coll = e->coll;
    if (e->ranks)
        for (int r = e->n_ranks - 1; r >= 1; r--) {
            if (coll && coll->bind) (void)coll->bind(coll, r);
            destroy_rank(e->ranks[r]);
        }
    if (coll && coll->bind) (void)coll->bind(coll, 0);
    free(e->ranks);
    free(e->h_losses_all);
    free(e->h_losses_hosts);
    destroy_rank(e);
    mt_collective_destroy(coll);
}
