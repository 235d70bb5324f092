// cmd_train.c: `megatrain train` (and the no-argument default run): set up the
// model, data and engine, run the steps, report JSON lines, save and resume.
// A save is never of a non-finite state, and a periodic save becomes the
// checkpoint only once the next step's loss shows its weights are sound: a run
// that diverges after a save exits 1 with the last good checkpoint in place.
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend_call.h"
#include "backend/backend_registry.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/ckpt_dir.h"
#include "cli/batch_auto.h"
#include "cli/commands.h"
#include "cli/io_paths.h"
#include "cli/progress.h"
#include "cli/run_setup.h"
#include "cli/run_signals.h"
#include "cli/train_state.h"
#include "core/bytes_text.h"
#include "core/env.h"
#include "core/host_mem.h"
#include "core/json_file.h"
#include "core/metrics.h"
#include "core/sysinfo.h"
#include "core/thread_room.h"
#include "data/dataloader.h"
#include "engine/engine.h"
#include "engine/host_shard.h"
#include "engine/host_shard_save.h"
#include "engine/hosts.h"
#include "engine/model_io.h"

#define MT_MAX_GPUS 64 // ranks one process may run (--gpus)

// Linear warmup over `warmup` steps, then constant or cosine down to lr/10 at the last step.
static float lr_at(const mt_options *o, int step) {
    if (o->warmup > 0 && step <= o->warmup) return o->lr * (float)step / (float)o->warmup;
    if (!strcmp(o->lr_schedule, "constant") || o->steps <= o->warmup) return o->lr;
    double progress = (double)(step - o->warmup) / (double)(o->steps - o->warmup);
    double min_lr = 0.1 * o->lr;
    return (float)(min_lr + 0.5 * (o->lr - min_lr) * (1 + cos(M_PI * progress)));
}

static mt_status open_data(const mt_options *o, const mt_config *c, mt_data *d) {
    if (!strcmp(o->data, "synthetic")) {
        size_t n = (size_t)o->eng.B * o->eng.T * 64 + 1;
        return mt_data_synthetic(d, o->seed, c->vocab_size, n);
    }
    if (!strcmp(o->data, "embedded")) {
        if (c->vocab_size < 256)
            return mt_fail(MT_ERR_ARG, "--data embedded: byte tokens need vocab_size >= 256 (model has %d)", c->vocab_size);
        if (mt_corpus_kjv_len < (size_t)o->eng.B * o->eng.T + 1)
            return mt_fail(MT_ERR_ARG, "--data embedded: the corpus is shorter than one batch");
        return mt_data_from_bytes(d, mt_corpus_kjv, mt_corpus_kjv_len, "embedded");
    }
    return mt_data_open_file(d, o->data, c->vocab_size, o->eng.B, o->eng.T);
}

// "ckpt keeps step 4" / "nothing was saved before", for messages about a save not made.
static void kept(const mt_ckpt_dir *cd, char *buf, size_t cap) {
    if (cd->committed_step >= 0) snprintf(buf, cap, "%s keeps step %d", cd->dir, cd->committed_step);
    else snprintf(buf, cap, "no checkpoint was saved before");
}

// Fails with the last error prefixed by `what` and followed by what --save still holds.
static mt_status fail_kept(mt_status s, const mt_ckpt_dir *cd, const char *what) {
    char why[1024], keep[4400];
    snprintf(why, sizeof why, "%s", mt_last_error());
    kept(cd, keep, sizeof keep);
    return mt_fail(s, "%s%s; %s", what, why, keep);
}

typedef struct {
    const mt_train_state *ts;
    const mt_options *o;
} state_save;
static mt_status write_train_state(const char *dir, void *ctx) {
    const state_save *ss = ctx;
    return mt_train_state_save(dir, ss->ts, ss->o);
}

// Writes the state after `step` into a fresh staging directory beside --save DIR.
static mt_status stage_checkpoint(mt_ckpt_dir *cd, const mt_model *m, mt_engine *e, const mt_options *o, int step,
                                  int skipped_steps, const mt_data *d) {
    char what[64];
    MT_TRY(mt_engine_finish(e)); // the last update must be in host memory
    mt_status s = mt_model_check_finite(m);
    snprintf(what, sizeof what, "step %d: not saved: ", step);
    if (s != MT_OK) return fail_kept(s, cd, what);
    if ((s = mt_checkpoint_check_space(cd, m, (size_t)o->shard_size)) != MT_OK) return fail_kept(s, cd, what);
    if ((s = mt_ckpt_dir_stage(cd)) != MT_OK) return fail_kept(s, cd, what);
    mt_train_state ts = {.step = step, .data_cursor = d->cursor, .skipped_steps = skipped_steps};
    mt_train_state_set_data(&ts, d);
    state_save ss = {&ts, o};
    s = mt_checkpoint_write(cd->staged, m, step, (size_t)o->shard_size, write_train_state, &ss);
    if (s != MT_OK) {
        mt_ckpt_dir_discard(cd);
        return fail_kept(s, cd, what);
    }
    return MT_OK;
}

// The sharded state's save is over, written or not: the serving hosts stop (the first error kept).
static mt_status shards_done(const mt_model_shards *sh, mt_status s) {
    mt_status d = mt_host_shard_done(sh);
    return s != MT_OK ? s : d;
}

static mt_status commit_checkpoint(mt_ckpt_dir *cd, int step) {
    mt_status s = mt_ckpt_dir_commit(cd, step);
    if (s != MT_OK) {
        char what[64];
        snprintf(what, sizeof what, "step %d: not saved: ", step);
        mt_ckpt_dir_discard(cd);
        return fail_kept(s, cd, what);
    }
    return MT_OK;
}

static int same_dir(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static mt_status emit_step(mt_sink *sink, int step, const mt_step_stats *st, float lr, double step_ms, double params) {
    cJSON *j = cJSON_CreateObject();
    mt_json_add_exact(j, "step", step);
    mt_json_add_exact(j, "loss", st->loss);
    char lr_text[32]; // the f32 lr as its shortest round-tripping decimal, not its double expansion
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(lr_text, sizeof lr_text, "%.*g", digits, lr);
        if ((float)strtod(lr_text, NULL) == lr) break;
    }
    cJSON_AddRawToObject(j, "lr", lr_text);
    mt_json_add_exact(j, "grad_norm", st->grad_norm);
    mt_json_add_exact(j, "clip", st->clip_factor);
    cJSON_AddBoolToObject(j, "skipped", st->skipped); // a non-finite gradient: no update (docs/STEP.md: non-finite gradients)
    mt_json_add_exact(j, "spec_units", st->spec_units); // updated under the backward (speculative step)
    mt_json_add_exact(j, "rollbacks", st->rollbacks);   // of those, restored and redone
    mt_json_add_exact(j, "tokens", (double)st->tokens);
    mt_json_add_exact(j, "step_ms", step_ms);
    mt_json_add_exact(j, "tokens_per_s", mt_metric_tokens_per_s((double)st->tokens, step_ms));
    mt_json_add_exact(j, "tflops", mt_metric_tflops(params, (double)st->tokens, step_ms));
    // Per-phase busy time from the engine's events (union of spans per stream / host thread).
    mt_json_add_exact(j, "compute_ms", st->compute_ms);
    mt_json_add_exact(j, "h2d_ms", st->h2d_ms);
    mt_json_add_exact(j, "d2h_ms", st->d2h_ms);
    mt_json_add_exact(j, "drain_ms", st->drain_ms);
    mt_json_add_exact(j, "optimizer_ms", st->optimizer_ms);
    mt_json_add_exact(j, "gpu_busy_frac", mt_metric_busy_frac(st->compute_ms, step_ms));
    mt_json_add_exact(j, "h2d_gbps", mt_metric_gbps(st->h2d_bytes, st->h2d_ms));
    mt_json_add_exact(j, "d2h_gbps", mt_metric_gbps(st->d2h_bytes, st->d2h_ms));
    mt_json_add_exact(j, "opt_wait_ms", st->opt_wait_ms);
    mt_json_add_exact(j, "drain_wait_ms", st->drain_wait_ms);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) mt_json_add_exact(j, "peak_rss_bytes", (double)ru.ru_maxrss * 1024);
    char *s = cJSON_PrintUnformatted(j);
    mt_status out = s ? mt_sink_line(sink, s) : mt_fail(MT_ERR_MEMORY, "step %d: cannot format the JSON line", step);
    free(s);
    cJSON_Delete(j);
    return out;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// --gpus N: the backends of ranks 1..N-1 (bes[0] is made), each on its own device; auto: every
// device the backend has. *n: the ranks. The batch splits into N equal slices.
static mt_status setup_ranks(const mt_options *o, mt_precision prec, mt_backend **bes, int *n) {
    int have = mt_backend_device_count(o->backend);
    int want = o->gpus ? o->gpus : have; // 0: auto
    if (want > have)
        return mt_fail(MT_ERR_ARG, "--gpus %d: --backend %s has %d device%s here", want, mt_backend_name(bes[0]), have,
                       have == 1 ? "" : "s");
    if (want > MT_MAX_GPUS)
        return mt_fail(MT_ERR_ARG, "--gpus %d: at most %d ranks in one process", want, MT_MAX_GPUS);
    MT_TRY(mt_engine_check_ranks(o->eng.B, want)); // again: a resume's batch comes from its checkpoint
    *n = 1;
    for (int r = 1; r < want; r++) {
        MT_TRY(mt_setup_backend_on(o->backend, o->hardware, prec, r, &bes[r]));
        *n = r + 1; // released with the run from here on
        MT_TRY(mt_setup_attention(bes[r], o->attention));
    }
    *n = want;
    return MT_OK;
}

// What a run holds from its setup to its release.
typedef struct {
    double t_start, t_backend, t_alloc, t_init, t_engine; // time to the first step, by phase
    mt_config cfg;
    mt_precision prec;
    mt_train_state rs;     // --resume: the state read
    mt_ckpt_manifest man;
    mt_ckpt_dir cd;
    mt_backend *be;
    mt_backend *bes[MT_MAX_GPUS]; // --gpus N: every rank's backend, bes[0] = be
    int n_gpus;
    mt_model model;
    mt_engine *eng;
    mt_data data;
    mt_sink sink;
    int32_t *inputs, *targets;
    size_t per_step;          // tokens a step reads
    double params;
    int virtual_run, json_stdout;
    mt_hosts *hosts;          // under mpirun: the other hosts (engine/hosts.h)
    mt_model_shards shards;   // with the optimizer state sharded across them (engine/host_shard.h)
    int shard;
    int H, quiet;             // hosts; quiet: not host 0, which alone writes stdout, --log and --save
    const char *save_dir;     // --save as given (host 0 saves it for every host)
    const char *save_all;     // what host 0 will save, known to every host (a sharded save needs all)
    int save_every;
    int agreed;               // the hosts agreed to stop: none has to take the others down
    // The loop's.
    int pending;              // the step whose save is staged, not yet committed (-1: none)
    int saved_last, skipped, interrupted;
    double first_loss, last_loss;
    mt_progress prog;
} train_run;

// The inputs: the hosts, the paths checked, --save's lock, --resume's checkpoint read, the
// config and the data (at the checkpoint's cursor).
static mt_status setup_inputs(train_run *r, mt_options *o, int is_default) {
    mt_status s;
    r->save_dir = o->save;
    // --resume DIR without --save: what it trains is saved back to DIR (at the end and every
    // --save-every), not thrown away. Host 0 alone says so (the others' outputs are dropped below).
    // (A DIR that is not there has nothing to resume: its error stays the read's, nothing is made.)
    const char *save_opt = "--save";
    struct stat resume_st;
    if (o->resume && !o->save && stat(o->resume, &resume_st) == 0 && S_ISDIR(resume_st.st_mode)) {
        o->save = o->resume;
        save_opt = "--resume (saved back to it without --save)";
    }
    r->save_all = o->save;
    r->save_every = o->save_every;
    // Under mpirun every host runs this with the same arguments and its own copy of the state;
    // host 0 alone writes the outputs (the others' state is the same, bit for bit).
    if (mt_hosts_launched()) {
        MT_TRY(mt_hosts_mpi_create(&r->hosts));
        r->H = r->hosts->n;
        if (r->hosts->rank > 0) {
            o->save = o->log = o->trace = o->dump_grads = NULL;
            o->save_every = 0;
            r->quiet = 1;
        }
    }

    // Outputs against inputs before anything is created; then the writer lock: a
    // second writer fails before any work, and a switch interrupted by a crash is
    // repaired before the checkpoint is read.
    MT_TRY(mt_check_io_paths(o));
    // The threads the ranks start (a drain each, a peer thread beyond rank 0, the optimizer's)
    // and their OpenMP teams (two a rank, as counted), proved before anything is saved or loaded.
    int ranks = o->gpus > 1 ? o->gpus : 1;
    MT_TRY(mt_thread_room_check(2 * ranks, 2 * ranks)); // every backend: the sim's host threads too
    if (o->save) MT_TRY(mt_ckpt_dir_open(&r->cd, o->save, save_opt));
    if (o->resume) {
        MT_TRY(mt_checkpoint_open(o->resume, &r->man));
        MT_TRY(mt_train_state_load(o->resume, &r->rs, o));
        if (r->rs.step != r->man.step)
            return mt_fail(MT_ERR_FORMAT,
                           "%s/train_state.json: step %d, but checkpoint.json records step %d: a mixed checkpoint",
                           o->resume, r->rs.step, r->man.step);
        if (!o->given.data) MT_TRY(mt_check_io_paths(o)); // the checkpoint's data is an input too
    }
    if (o->save && o->save == o->resume) // said once the checkpoint reads
        fprintf(stderr, "megatrain: --resume %s: saving back to it at the end%s (--save DIR saves elsewhere)\n",
                o->resume, o->save_every ? " and every --save-every steps" : "");
    mt_config *cfg = &r->cfg;
    MT_TRY(mt_setup_config(o, cfg, is_default));
    MT_TRY(mt_config_validate(cfg, o->model ? o->model : o->config ? o->config : "default model"));
    MT_TRY(mt_precision_parse(o->precision, &r->prec));
    mt_precision prec = r->prec;
    if (o->eng.T > cfg->max_position_embeddings)
        fprintf(stderr, "megatrain: note: --seq-len %d exceeds max_position_embeddings %d\n", o->eng.T,
                cfg->max_position_embeddings);
    if (o->batch_auto) MT_TRY(mt_setup_batch_auto(o, cfg, prec));
    if ((s = open_data(o, cfg, &r->data))) {
        if (o->resume && !o->given.data) { // the path came from the checkpoint: say so
            char why[1024];
            snprintf(why, sizeof why, "%s", mt_last_error());
            s = mt_fail(s, "%s/train_state.json records the data %s: %s", o->resume, r->rs.data, why);
        }
        return s;
    }
    if (o->resume) {
        if (r->rs.step > o->steps)
            return mt_fail(MT_ERR_ARG, "--steps %d: the checkpoint in %s is already at step %d", o->steps, o->resume,
                           r->rs.step);
        MT_TRY(mt_train_state_resume_data(o->resume, &r->rs, o, &r->data));
    }
    return MT_OK;
}

// The backends (one a rank), the peer's rates, the host threads bound near the GPU.
static mt_status setup_backends(train_run *r, const mt_options *o) {
    mt_precision prec = r->prec;
    MT_TRY(mt_setup_backend(o->backend, o->hardware, prec, &r->be));
    MT_TRY(mt_setup_attention(r->be, o->attention));
    mt_backend *be = r->be;
    r->bes[0] = be;
    MT_TRY(setup_ranks(o, prec, r->bes, &r->n_gpus));
    r->t_backend = mono_s();
    mt_peer_rate peer_rate;
    MT_TRY(mt_setup_peer(o->peer, prec, be, &peer_rate));
    if (o->peer)
        fprintf(stderr, "megatrain: --peer %s: optimizer %.3g params/s with its host passes (%s)\n", o->peer,
                peer_rate.params_per_s, peer_rate.source);
    // Host threads (created from here on: drain, optimizer, OpenMP) and the pinned
    // state they first touch go to the GPU's NUMA node.
    mt_device_info near;
    mt_numa_binding nb;
    if (mt_backend_device_info(be, &near) == MT_OK && near.numa_node >= 0) {
        if (mt_numa_bind_node(near.numa_node, &nb) == MT_OK)
            fprintf(stderr, "megatrain: host threads bound to NUMA node %d (the GPU's); memory %s: %s\n",
                    near.numa_node, nb.memory ? "prefers it" : "not bound", nb.mem_how);
        else
            fprintf(stderr, "megatrain: note: could not bind to NUMA node %d: %s\n", near.numa_node, mt_last_error());
    }
    return MT_OK;
}

// The host state (loaded, resumed or initialised) and the engine over the ranks (and hosts).
static mt_status setup_model(train_run *r, mt_options *o) {
    const mt_config *cfg = &r->cfg;
    const mt_precision prec = r->prec;
    mt_backend *be = r->be;
    const int H = r->H, n_gpus = r->n_gpus;
    mt_engine_opts eo = o->eng; // the one options struct: the engine takes it as parsed
    eo.keep_trace = o->trace != NULL;
    if (H > 1) {
        if (eo.B % (H * n_gpus))
            return mt_fail(MT_ERR_ARG, "--batch %d is not divisible by %d hosts x --gpus %d: each rank takes B/(hosts "
                                       "x N) rows of every micro-batch", eo.B, H, n_gpus);
        eo.B /= H; // this host's rows; the step's tokens stay the global batch's
        if (eo.sched.speculative == 1)
            return mt_fail(MT_ERR_ARG, "--speculative-step true with several hosts: a unit would be updated with one "
                                       "host's gradients before the hosts' sum; drop it");
        eo.sched.speculative = 0;
        if (!r->quiet) fprintf(stderr, "megatrain: %d hosts (MPI): the speculative step is off\n", H);
    }
    if (o->shard_optimizer && strcmp(o->shard_optimizer, "hosts") && strcmp(o->shard_optimizer, "off"))
        return mt_fail(MT_ERR_ARG, "--shard-optimizer %s: expected hosts or off", o->shard_optimizer);
    mt_schedule_desc resolved;
    mt_schedule_resolve(eo.schedule, &eo.sched, cfg, &resolved);
    r->virtual_run = !mt_backend_has(be, MT_CAP_TENSOR_DATA);
    r->shard = H > 1 && !r->virtual_run && (!o->shard_optimizer || !strcmp(o->shard_optimizer, "hosts"));
    if (r->shard && o->dump_grads) // host 0 holds the hosts' sum of its own slice only
        return mt_fail(MT_ERR_ARG, "--dump-grads with the optimizer state sharded across %d hosts: host 0 holds the "
                                   "summed gradient of its slice only. HINT: add --shard-optimizer off", H);
    // The gradients are sliced with the state where one rank per host sums them as they land, beside
    // the backward (an MPI with threads); else each host keeps them whole for the step's sum.
    mt_state_slice sl = {.H = r->shard ? H : 1, .h = r->hosts ? r->hosts->rank : 0,
                         .grads = r->shard && n_gpus == 1 && r->hosts->reduce_scatter_add};
    MT_TRY(mt_engine_check_host_memory_ranks(cfg, prec, &eo, be, n_gpus, &sl)); // one check, before any allocation
    double t0 = mono_s();
    MT_TRY(mt_model_alloc_sliced(&r->model, cfg, prec, be, resolved.host_pinned, &sl));
    r->t_alloc = mono_s() - t0;
    t0 = mono_s();
    mt_model *model = &r->model;
    // A save: every host writes its slices (a --save every host shares), or host 0 all (host0).
    r->shards = (mt_model_shards){.hosts = r->hosts, .m = model};
    r->shards.per_host = !o->save_layout || !strcmp(o->save_layout, "hosts");
    if (r->shard) model->shards = &r->shards; // a load keeps this host's slices, a save gathers them (host_shard.h)
    // Per-host saves need a --save every host sees: proved now, not at the first save hours in.
    if (r->shard && r->shards.per_host && r->save_all && !mt_env_flag("MT_FAULT_NO_SHARE_PROBE"))
        MT_TRY(mt_host_shard_check_shared(&r->shards, r->quiet ? NULL : r->cd.parent, r->quiet ? NULL : r->cd.name));
    if (r->virtual_run) {
        // no tensor data exists: nothing to load or initialise
    } else if (o->resume) {
        MT_TRY(mt_model_load_weights(model, o->resume, &r->man.weights, NULL));
        MT_TRY(mt_model_load_optimizer(model, o->resume, &r->man.moments));
    } else if (o->model) {
        mt_load_report rep = {.allow_unused = o->allow_unused};
        MT_TRY(mt_checkpoint_load_model(model, o->model, &rep));
        mt_note_unused(&rep);
    } else {
        mt_model_init_random(model, o->seed);
    }
    r->t_init = mono_s() - t0;
    t0 = mono_s();
    MT_TRY(mt_engine_create_ranks(model, r->bes, n_gpus, &eo, &r->eng));
    MT_TRY(mt_engine_set_hosts(r->eng, r->hosts));
    if (r->shard) MT_TRY(mt_engine_shard_optimizer(r->eng));
    if (r->shard && !r->quiet)
        fprintf(stderr, "megatrain: %d hosts: the optimizer state %s sharded, each host keeps 1/%d of %s "
                        "(--shard-optimizer off keeps %s whole on every host)\n", H,
                model->slice.grads ? "and the gradients' sum are" : "is", H, model->slice.grads ? "them" : "it",
                model->slice.grads ? "them" : "it");
    r->t_engine = mono_s() - t0;
    // What the run does, in train_state.json too: a resume sums the same way (bit-exact trajectory).
    o->eng.grad_sum = mt_engine_grad_sum(r->eng);
    if (eo.grad_sum == MT_GRAD_SUM_AUTO && model->wdt != MT_F32 && o->eng.grad_sum != MT_GRAD_SUM_F32)
        fprintf(stderr, "megatrain: note: chunked weight gradients are summed in bf16 (one rounding per chunk): the "
                        "f32 buffer does not fit the device plan (--grad-accum-dtype f32 insists)\n");
    if (o->eng.sched.recompute == MT_RECOMPUTE_AUTO)
        fprintf(stderr, "megatrain: --recompute auto: %s (the least recompute whose device plan fits)\n",
                mt_recompute_name(mt_engine_recompute(r->eng)));
    size_t devopt_bytes;
    int devopt_units = mt_engine_device_units(r->eng, &devopt_bytes);
    if (devopt_units)
        fprintf(stderr, "megatrain: --device-optimizer: %d units' optimizer state on the device (%.2f GiB), updated "
                        "there (embedding, head, then layers in order)\n", devopt_units, devopt_bytes / 1073741824.0);
    if (devopt_units && o->dump_grads)
        return mt_fail(MT_ERR_ARG, "--dump-grads with --device-optimizer: the device's units' gradients never reach "
                                   "the host; give --device-optimizer off");
    // A run whose saves cannot fit stops before it trains (checked again before each save).
    if (o->save && !r->virtual_run) MT_TRY(mt_checkpoint_check_space(&r->cd, model, (size_t)o->shard_size));
    return MT_OK;
}

// The outputs (stdout, --log), the step's batch buffers, the signals; stderr says what the run is.
static mt_status setup_outputs(train_run *r, const mt_options *o) {
    const mt_config *cfg = &r->cfg;
    const int H = r->H, n_gpus = r->n_gpus;
    r->json_stdout = mt_json_on_stdout(o); // else a person reads stdout: a short line a step there
    MT_TRY(mt_sink_open(&r->sink, o->log, o->resume != NULL, r->json_stdout));

    size_t per_step = r->per_step = (size_t)o->eng.grad_accum * o->eng.B * o->eng.T;
    r->inputs = malloc(2 * per_step * 4); // this step's batch, then the next one's (read ahead: rows first)
    r->targets = malloc(2 * per_step * 4);
    if (!r->inputs || !r->targets)
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the step's batch: --grad-accum %d x --batch %d x "
                                      "--seq-len %d = %zu tokens (%s of ids, twice); lower one of them",
                       o->eng.grad_accum, o->eng.B, o->eng.T, per_step, mt_bytes_format(per_step * 8).s);
    mt_run_signals_catch();

    mt_device_info info;
    mt_backend_device_info(r->be, &info);
    r->params = (double)mt_config_params_total(cfg);
    char ranks_note[160] = "";
    if (n_gpus > 1 || H > 1)
        snprintf(ranks_note, sizeof ranks_note, " x %d devices%s%.0d%s (%d rows of each micro-batch each)", n_gpus,
                 H > 1 ? " x " : "", H > 1 ? H : 0, H > 1 ? " hosts" : "", o->eng.B / (n_gpus * H));
    fprintf(stderr,
            "megatrain: %s %.2fM params, %d layers | %s precision, grads summed in %s | %s schedule | backend %s (%s)%s "
            "| data %s\n",
            mt_arch_model_type(cfg->arch), r->params / 1e6, cfg->num_layers, o->precision,
            mt_grad_sum_name(o->eng.grad_sum), o->eng.schedule->name, mt_backend_name(r->be), info.name, ranks_note,
            r->data.source);
    return MT_OK;
}

// Everything a step needs, checked and made, in that order.
static mt_status train_setup(train_run *r, mt_options *o, int is_default) {
    MT_TRY(setup_inputs(r, o, is_default));
    MT_TRY(setup_backends(r, o));
    MT_TRY(setup_model(r, o));
    return setup_outputs(r, o);
}

// A resume already at --steps: nothing to train; a --save elsewhere gets the checkpoint.
static mt_status train_nothing(train_run *r, const mt_options *o) {
    mt_status s;
    const mt_train_state *rs = &r->rs;
    if (r->shard && r->quiet && r->save_all) MT_TRY(mt_host_shard_serve(&r->shards)); // host 0 may save
    if (o->save && !same_dir(r->cd.dir, o->resume)) {
        s = stage_checkpoint(&r->cd, &r->model, r->eng, o, rs->step, rs->skipped_steps, &r->data);
        if (r->shard) s = shards_done(&r->shards, s);
        MT_TRY(s);
        MT_TRY(commit_checkpoint(&r->cd, rs->step));
        fprintf(stderr, "megatrain: nothing to train (the checkpoint is at step %d = --steps); saved it to %s\n",
                rs->step, o->save);
    } else {
        if (r->shard && !r->quiet && r->save_all) MT_TRY(mt_host_shard_done(&r->shards)); // the others serve
        fprintf(stderr, "megatrain: nothing to train: %s is already at step %d (--steps %d)\n", o->resume, rs->step,
                o->steps);
    }
    return MT_OK;
}

// The save after `step`: staged, and committed now when no next step will vouch for it
// (last, or stopping), else once the next step's loss is finite (r->pending).
static mt_status train_save(train_run *r, const mt_options *o, int step, int last, int stop) {
    // Sharded, every host takes part in a save (each writes its part, or with --save-layout host0
    // serves host 0's fetches): host 0's --save (or --resume) and --save-every, the same on every host.
    int due = r->save_all && (last || stop || (r->save_every && step % r->save_every == 0));
    if (r->shard && r->quiet && due) { // a per-host save writes this host's state: its last update in first
        MT_TRY(mt_engine_finish(r->eng));
        MT_TRY(mt_host_shard_serve(&r->shards));
    }
    if (!(o->save && (last || stop || (o->save_every && step % o->save_every == 0)))) return MT_OK;
    mt_status s = stage_checkpoint(&r->cd, &r->model, r->eng, o, step, r->skipped, &r->data);
    if (r->shard) s = shards_done(&r->shards, s);
    MT_TRY(s);
    if (last || stop) { // no next step to vouch for it; it is finite
        MT_TRY(commit_checkpoint(&r->cd, step));
        if (!last) fprintf(stderr, "megatrain: saved step %d to %s\n", step, o->save);
        r->saved_last = last;
    } else {
        r->pending = step;
    }
    return MT_OK;
}

// Steps first_step..--steps, each saved as --save and --save-every ask; a signal or a lost
// output line stops the run after its step (r->interrupted: by a signal).
static mt_status train_loop(train_run *r, mt_options *o, int first_step) {
    mt_status s;
    mt_engine *eng = r->eng;
    const size_t per_step = r->per_step;
    int32_t *inputs = r->inputs, *targets = r->targets;
    mt_progress_start(&r->prog, first_step, o->steps, !r->json_stdout && !r->quiet);
    r->first_loss = r->last_loss = NAN;
    r->skipped = r->rs.skipped_steps;
    char lost[1200] = ""; // why a step's line did not reach stdout or the log
    for (int step = first_step; step <= o->steps; step++) {
        for (int g = 0; g < o->eng.grad_accum; g++)
            mt_data_next(&r->data, o->eng.B, o->eng.T, inputs + (size_t)g * o->eng.B * o->eng.T,
                         targets + (size_t)g * o->eng.B * o->eng.T);
        if (step < o->steps) { // the next batch, read from a copy of the loader (its cursor is the checkpoint's)
            mt_data ahead = r->data;
            for (int g = 0; g < o->eng.grad_accum; g++)
                mt_data_next(&ahead, o->eng.B, o->eng.T, inputs + per_step + (size_t)g * o->eng.B * o->eng.T,
                             targets + per_step + (size_t)g * o->eng.B * o->eng.T);
            mt_engine_next_inputs(eng, inputs + per_step);
        }
        float lr = lr_at(o, step);
        mt_optim_hparams hp = {o->lr, o->weight_decay, o->beta1, o->beta2, o->eps, o->grad_clip, r->skipped};
        mt_step_stats st;
        double t0 = mt_engine_now_ms(eng);
        MT_TRY(mt_engine_step(eng, inputs, targets, &hp, lr, step, &st));
        if (step == o->steps) MT_TRY(mt_engine_finish(eng)); // the last update counts in its step
        double step_ms = mt_engine_now_ms(eng) - t0;
        if (!r->virtual_run && !isfinite(st.loss)) {
            char keep[4400] = "";
            if (o->save) kept(&r->cd, keep, sizeof keep);
            if (r->pending >= 0) mt_ckpt_dir_discard(&r->cd); // its weights gave this loss: not a checkpoint to keep
            return mt_fail(MT_ERR_ARG, "step %d: loss is %s; try a lower --lr%s%s", step,
                           isnan(st.loss) ? "nan" : "inf", keep[0] ? "; " : "", keep);
        }
        if (r->pending >= 0) { // this loss came from the staged weights: they are sound
            MT_TRY(commit_checkpoint(&r->cd, r->pending));
            fprintf(stderr, "megatrain: saved step %d to %s\n", r->pending, o->save);
            r->pending = -1;
        }
        if (st.skipped) {
            r->skipped++;
            fprintf(stderr, "megatrain: step %d: the gradient norm is not finite; the step is skipped (no update)\n", step);
        }
        if (step == 1 && o->dump_grads) MT_TRY(mt_model_save_grads(&r->model, o->dump_grads));
        // A line stdout or the log did not take stops the run after this step (saved
        // with --save); stdout's reader gone (EPIPE) is SIGPIPE, an interrupt.
        if (!r->quiet && emit_step(&r->sink, step, &st, lr, step_ms, r->params) != MT_OK &&
            r->sink.stdout_errno != EPIPE && !lost[0])
            snprintf(lost, sizeof lost, "%s", mt_last_error());
        if (isnan(r->first_loss)) r->first_loss = st.loss;
        r->last_loss = st.loss;
        mt_progress_update(&r->prog, step, st.loss, step_ms, (double)st.tokens,
                           mt_metric_tflops(r->params, (double)st.tokens, step_ms));
        int last = step == o->steps;
        int sig = mt_run_signal_caught() ? mt_run_signal_caught() : r->sink.stdout_errno == EPIPE ? SIGPIPE : 0;
        const char *where = "";
        if (r->H > 1) { // a stop any host sees (a signal to one rank, host 0's lost output) stops all at this boundary
            int v[2] = {sig, lost[0] != 0}, mine = sig;
            MT_TRY(r->hosts->agree_max(r->hosts, v, 2));
            sig = v[0];
            if (sig && !mine) where = " (sent to another host)";
            if (v[1] && !lost[0]) snprintf(lost, sizeof lost, "host 0's output failed");
            r->agreed = sig || v[1];
        }
        MT_TRY(train_save(r, o, step, last, sig || lost[0]));
        const char *save_dir = r->save_dir;
        if (lost[0])
            return mt_fail(MT_ERR_IO, "%s: the run stopped after step %d%s%s", lost, step,
                           !save_dir  ? " (no --save: the trained state is not kept)"
                           : r->quiet ? "; host 0 saves it in "
                                      : "; it is saved in ",
                           save_dir ? save_dir : "");
        if (sig && !last) {
            fprintf(stderr, "megatrain: interrupted by %s%s%s after step %d%s%s\n", mt_run_signal_name(sig), where,
                    sig == SIGPIPE && r->sink.stdout_errno == EPIPE ? " (stdout was closed)" : "", step,
                    !save_dir  ? " (no --save: state not kept)"
                    : r->quiet ? "; host 0 saves it to "
                               : "; saved to ",
                    save_dir ? save_dir : "");
            r->interrupted = 1;
            return MT_OK;
        }
    }
    MT_TRY(mt_engine_finish(eng));
    if (!r->virtual_run && !r->saved_last && (s = mt_model_check_finite(&r->model))) { // the run's result, saved or not
        char why[900];
        snprintf(why, sizeof why, "%s", mt_last_error());
        return mt_fail(s, "after step %d: the trained state is not finite: %s", o->steps, why);
    }
    return MT_OK;
}

// What is written after the last save (trace, the log's end): a failure says that the
// training itself is kept.
static mt_status train_outputs(train_run *r, const mt_options *o) {
    mt_status s = MT_OK;
    if (o->trace) s = mt_engine_write_trace(r->eng, o->trace);
    if (s == MT_OK && o->trace && mt_backend_supports(r->be, MT_OP_TRACE_WRITE)) { // a backend's own op timeline (sim)
        char ops_path[1100];
        snprintf(ops_path, sizeof ops_path, "%s.ops.json", o->trace);
        s = mt_backend_trace_write(r->be, ops_path);
    }
    if (s == MT_OK) s = mt_sink_close(&r->sink); // the log's last lines are lost: an error, whatever was saved
    if (s != MT_OK && r->saved_last) {
        char why[1024];
        snprintf(why, sizeof why, "%s", mt_last_error());
        s = mt_fail(s, "%s; the trained state is saved in %s", why, o->save);
    }
    return s;
}

int mt_cmd_train(mt_options *o, int is_default) {
    train_run *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "megatrain: error: host memory: cannot start the run\n");
        return 1;
    }
    *r = (train_run){.t_start = mono_s(), .cd = {.lock_fd = -1, .committed_step = -1}, .n_gpus = 1, .H = 1,
                     .pending = -1};
    int rc = 1;
    mt_status s = train_setup(r, o, is_default);
    int first_step = r->rs.step + 1;
    if (s == MT_OK && first_step > o->steps) {
        s = train_nothing(r, o);
        if (s == MT_OK) rc = 0;
    } else if (s == MT_OK) {
        // Time to the first step (the campaign's sweep reads "ready in X s").
        fprintf(stderr,
                "megatrain: ready in %.1f s (backend %.1f s, host state %.1f GiB allocated in %.1f s%s, %s %.1f s, "
                "engine %.1f s)\n",
                mono_s() - r->t_start, r->t_backend - r->t_start, mt_model_host_bytes(&r->cfg, r->prec) / 1073741824.0,
                r->t_alloc, mt_host_mem_hugepages() ? ", huge pages asked" : "",
                r->virtual_run ? "no data" : o->resume ? "resume" : o->model ? "load" : "random init", r->t_init,
                r->t_engine);
        s = train_loop(r, o, first_step);
        if (s == MT_OK && r->interrupted) rc = 130;
        else if (s == MT_OK && (s = train_outputs(r, o)) == MT_OK) {
            char json_dest[1100];
            snprintf(json_dest, sizeof json_dest, "--log %s", o->log ? o->log : "");
            mt_progress_end(&r->prog, o->log ? json_dest : r->json_stdout ? "stdout" : NULL);
            if (is_default)
                fprintf(stderr, "megatrain: loss %.4f -> %.4f over %d steps on the embedded corpus\n", r->first_loss,
                        r->last_loss, o->steps);
            if (r->saved_last) fprintf(stderr, "megatrain: saved step %d to %s\n", o->steps, o->save);
            rc = 0;
        }
    }
    if (s != MT_OK) {
        fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
        rc = (s == MT_ERR_INTERRUPTED) ? 130 : 1;
    }
    mt_run_release(&(mt_run_parts){r->be, &r->model, r->eng, &r->data, &r->sink, r->inputs, r->targets, r->bes + 1,
                                   r->n_gpus - 1});
    mt_ckpt_dir_close(&r->cd); // a save still staged (a failed run) is removed; DIR keeps what it had
    mt_ckpt_manifest_free(&r->man);
    mt_train_state_free(&r->rs);
    mt_config_release(&r->cfg); // after the model, which borrowed its source text for the saves
    if (r->hosts) // a failed host takes the others down with it
        r->hosts->destroy(r->hosts, rc != 0 && rc != 130 && !r->agreed);
    free(r);
    return rc;
}
