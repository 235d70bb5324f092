// cmd_train.c: `megatrain train` (and the no-argument default run): set up the
// model, data and engine, run the steps, report JSON lines, save and resume.
#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/run_setup.h"
#include "cli/train_state.h"
#include "data/dataloader.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "topology.h"

static volatile sig_atomic_t interrupted = 0;
static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

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
        size_t n = (size_t)o->batch * o->seq_len * 64 + 1;
        return mt_data_synthetic(d, o->seed, c->vocab_size, n);
    }
    if (!strcmp(o->data, "embedded")) {
        if (c->vocab_size < 256)
            return mt_fail(MT_ERR_ARG, "--data embedded: byte tokens need vocab_size >= 256 (model has %d)", c->vocab_size);
        if (mt_corpus_kjv_len < (size_t)o->batch * o->seq_len + 1)
            return mt_fail(MT_ERR_ARG, "--data embedded: the corpus is shorter than one batch");
        return mt_data_from_bytes(d, mt_corpus_kjv, mt_corpus_kjv_len, "embedded");
    }
    return mt_data_open_file(d, o->data, c->vocab_size, o->batch, o->seq_len);
}

static mt_status save_checkpoint(const char *dir, const mt_model *m, mt_engine *e, const mt_options *o, int step,
                                 const mt_data *d) {
    MT_TRY(mt_engine_finish(e)); // the last update must be in host memory
    MT_TRY(mt_make_dir(dir, "--save"));
    MT_TRY(mt_model_save(m, dir));
    mt_train_state ts = {.step = step, .data_cursor = d->cursor};
    snprintf(ts.data, sizeof ts.data, "%s", d->source);
    return mt_train_state_save(dir, &ts, o); // last: a checkpoint is complete once this exists
}

static void emit_step(mt_sink *sink, int step, const mt_step_stats *st, float lr, double step_ms, double params) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "step", step);
    cJSON_AddNumberToObject(j, "loss", st->loss);
    char lr_text[32]; // the f32 lr as its shortest round-tripping decimal, not its double expansion
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(lr_text, sizeof lr_text, "%.*g", digits, lr);
        if ((float)strtod(lr_text, NULL) == lr) break;
    }
    cJSON_AddRawToObject(j, "lr", lr_text);
    cJSON_AddNumberToObject(j, "grad_norm", st->grad_norm);
    cJSON_AddNumberToObject(j, "clip", st->clip_factor);
    cJSON_AddNumberToObject(j, "tokens", (double)st->tokens);
    cJSON_AddNumberToObject(j, "step_ms", step_ms);
    cJSON_AddNumberToObject(j, "tokens_per_s", st->tokens / (step_ms / 1e3));
    cJSON_AddNumberToObject(j, "tflops", 6.0 * params * st->tokens / (step_ms / 1e3) / 1e12);
    // Per-phase busy time from the engine's events (union of spans per stream / host thread).
    cJSON_AddNumberToObject(j, "compute_ms", st->compute_ms);
    cJSON_AddNumberToObject(j, "h2d_ms", st->h2d_ms);
    cJSON_AddNumberToObject(j, "d2h_ms", st->d2h_ms);
    cJSON_AddNumberToObject(j, "drain_ms", st->drain_ms);
    cJSON_AddNumberToObject(j, "optimizer_ms", st->optimizer_ms);
    cJSON_AddNumberToObject(j, "gpu_busy_frac", step_ms > 0 ? st->compute_ms / step_ms : 0);
    cJSON_AddNumberToObject(j, "h2d_gbps", st->h2d_ms > 0 ? st->h2d_bytes / (st->h2d_ms * 1e6) : 0);
    cJSON_AddNumberToObject(j, "d2h_gbps", st->d2h_ms > 0 ? st->d2h_bytes / (st->d2h_ms * 1e6) : 0);
    cJSON_AddNumberToObject(j, "opt_wait_ms", st->opt_wait_ms);
    cJSON_AddNumberToObject(j, "drain_wait_ms", st->drain_wait_ms);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)ru.ru_maxrss * 1024);
    char *s = cJSON_PrintUnformatted(j);
    mt_sink_line(sink, s);
    free(s);
    cJSON_Delete(j);
}

// Checks up front that --save DIR can be written (so a typo fails before hours of training).
static mt_status check_save_dir(const char *dir) {
    MT_TRY(mt_make_dir(dir, "--save"));
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.megatrain-write-test", dir);
    FILE *f = fopen(probe, "w");
    if (!f) return mt_fail(MT_ERR_IO, "--save %s: directory is not writable", dir);
    fclose(f);
    unlink(probe);
    return MT_OK;
}

int mt_cmd_train(mt_options *o, int is_default) {
    mt_status s;
    mt_config cfg;
    mt_train_state resume_state = {0};
    char *resume_strings[3] = {0};
    mt_backend *be = NULL;
    mt_model model = {0};
    mt_engine *eng = NULL;
    mt_data data = {0};
    mt_sink sink = {0};
    int32_t *inputs = NULL, *targets = NULL;
    int rc = 1;

    if (o->resume && (s = mt_train_state_load(o->resume, &resume_state, o, resume_strings, 3))) goto fail;
    if ((s = mt_setup_config(o, &cfg, is_default))) goto fail;
    if ((s = mt_config_validate(&cfg, o->model ? o->model : o->config ? o->config : "default model"))) goto fail;
    mt_precision prec;
    mt_schedule sched;
    if ((s = mt_precision_parse(o->precision, &prec)) || (s = mt_schedule_parse(o->schedule, &sched))) goto fail;
    if (o->seq_len > cfg.max_position_embeddings)
        fprintf(stderr, "megatrain: note: --seq-len %d exceeds max_position_embeddings %d\n", o->seq_len,
                cfg.max_position_embeddings);
    if (o->save && (s = check_save_dir(o->save))) goto fail;
    if ((s = open_data(o, &cfg, &data))) goto fail;
    if (o->resume) {
        if (resume_state.step > o->steps) {
            s = mt_fail(MT_ERR_ARG, "--steps %d: the checkpoint in %s is already at step %d", o->steps, o->resume,
                        resume_state.step);
            goto fail;
        }
        data.cursor = resume_state.data_cursor < data.n ? resume_state.data_cursor : 0;
    }
    if ((s = mt_setup_backend(o->backend, o->hardware, prec, &be)) || (s = mt_setup_attention(be, o->attention))) goto fail;
    // Host threads (created from here on: drain, optimizer, OpenMP) and the pinned
    // state they first touch go to the GPU's NUMA node.
    mt_device_info near;
    if (be->ops->device_info(be, &near) == MT_OK && near.numa_node >= 0) {
        if (mt_topology_bind_to_node(near.numa_node) == MT_OK)
            fprintf(stderr, "megatrain: host threads and memory bound to NUMA node %d (the GPU's)\n", near.numa_node);
        else
            fprintf(stderr, "megatrain: note: could not bind to NUMA node %d: %s\n", near.numa_node, mt_last_error());
    }

    int pinned = !(sched == MT_SCHED_ZERO3 && !o->zero3_pin_memory);
    if ((s = mt_model_alloc_ex(&model, &cfg, prec, be, pinned))) goto fail;
    int virtual_run = mt_backend_is_virtual(be);
    if (virtual_run && (o->save || o->resume || o->dump_grads)) {
        s = mt_fail(MT_ERR_ARG, "--backend sim: simulates timing only; --save, --resume and --dump-grads need data");
        goto fail;
    }
    if (virtual_run) {
        // no tensor data exists: nothing to load or initialise
    } else if (o->resume) {
        if ((s = mt_model_load_weights(&model, o->resume)) || (s = mt_model_load_optimizer(&model, o->resume))) goto fail;
    } else if (o->model) {
        if ((s = mt_model_load_weights(&model, o->model))) goto fail;
    } else {
        mt_model_init_random(&model, o->seed);
    }
    mt_engine_opts eo = {.schedule = sched, .B = o->batch, .T = o->seq_len, .grad_accum = o->grad_accum,
                         .ckpt_interval = o->ckpt_interval, .weight_bufs = o->weight_bufs,
                         .grad_slabs = o->grad_slabs, .overlap_optimizer = !o->serial_optimizer,
                         .copy_bind = !strcmp(o->bind, "copy"), .keep_trace = o->trace != NULL,
                         .mlp_rows = o->mlp_chunk, .offload_checkpoints = o->offload_checkpoints,
                         .zero3 = {o->zero3_pin_memory, o->zero3_overlap_comm, o->zero3_prefetch_bucket_size,
                                   o->zero3_param_persistence_threshold, o->zero3_reduce_bucket_size,
                                   o->zero3_max_live_parameters}};
    if ((s = mt_engine_create(&model, be, &eo, &eng))) goto fail;
    if ((s = mt_sink_open(&sink, o->log, o->resume != NULL))) goto fail;

    size_t per_step = (size_t)o->grad_accum * o->batch * o->seq_len;
    inputs = malloc(per_step * 4);
    targets = malloc(per_step * 4);
    if (!inputs || !targets) {
        s = mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the batch");
        goto fail;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    mt_device_info info;
    be->ops->device_info(be, &info);
    double params = (double)mt_config_params_total(&cfg);
    fprintf(stderr, "megatrain: %s %.2fM params, %d layers | %s precision | %s schedule | backend %s (%s) | data %s\n",
            mt_arch_model_type(cfg.arch), params / 1e6, cfg.num_layers, o->precision, o->schedule, be->ops->name,
            info.name, data.source);
    mt_progress prog;
    int first_step = resume_state.step + 1;
    mt_progress_start(&prog, first_step, o->steps);
    double first_loss = NAN, last_loss = NAN;
    for (int step = first_step; step <= o->steps; step++) {
        for (int g = 0; g < o->grad_accum; g++)
            mt_data_next(&data, o->batch, o->seq_len, inputs + (size_t)g * o->batch * o->seq_len,
                         targets + (size_t)g * o->batch * o->seq_len);
        float lr = lr_at(o, step);
        mt_optim_hparams hp = {o->lr, o->weight_decay, o->beta1, o->beta2, o->eps, o->grad_clip};
        mt_step_stats st;
        double t0 = mt_engine_now_ms(eng);
        if ((s = mt_engine_step(eng, inputs, targets, &hp, lr, step, &st))) goto fail;
        if (step == o->steps && (s = mt_engine_finish(eng))) goto fail; // the last update counts in its step
        double step_ms = mt_engine_now_ms(eng) - t0;
        if (!virtual_run && !isfinite(st.loss)) {
            s = mt_fail(MT_ERR_ARG, "step %d: loss is %f; try a lower --lr", step, st.loss);
            goto fail;
        }
        if (step == 1 && o->dump_grads && (s = mt_model_save_grads(&model, o->dump_grads))) goto fail;
        emit_step(&sink, step, &st, lr, step_ms, params);
        if (isnan(first_loss)) first_loss = st.loss;
        last_loss = st.loss;
        mt_progress_update(&prog, step, st.loss, st.tokens / (step_ms / 1e3));
        int last = step == o->steps;
        if (o->save && (last || interrupted || (o->save_every && step % o->save_every == 0))) {
            if ((s = save_checkpoint(o->save, &model, eng, o, step, &data))) goto fail;
            if (!last) fprintf(stderr, "megatrain: saved step %d to %s\n", step, o->save);
        }
        if (interrupted && !last) {
            fprintf(stderr, "megatrain: interrupted after step %d%s%s\n", step, o->save ? "; saved to " : " (no --save: state not kept)",
                    o->save ? o->save : "");
            rc = 130;
            goto done;
        }
    }
    if ((s = mt_engine_finish(eng))) goto fail;
    if (o->trace && (s = mt_engine_write_trace(eng, o->trace))) goto fail;
    if (o->trace && be->ops->trace_write) { // sim: every kernel and copy too, beside the engine's layer view
        char ops_path[1100];
        snprintf(ops_path, sizeof ops_path, "%s.ops.json", o->trace);
        if ((s = be->ops->trace_write(be, ops_path))) goto fail;
    }
    mt_progress_end(&prog);
    if (is_default)
        fprintf(stderr, "megatrain: loss %.4f -> %.4f over %d steps on the embedded corpus\n", first_loss, last_loss,
                o->steps);
    if (o->save) fprintf(stderr, "megatrain: saved to %s\n", o->save);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
    rc = (s == MT_ERR_INTERRUPTED) ? 130 : 1;
done:
    mt_run_release(&(mt_run_parts){be, &model, eng, &data, &sink, inputs, targets});
    for (int i = 0; i < 3; i++) free(resume_strings[i]);
    return rc;
}
