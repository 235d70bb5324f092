// cmd_eval.c: `megatrain eval`: mean loss of a model over a token file.
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/io_paths.h"
#include "cli/run_setup.h"
#include "data/dataloader.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "core/thread_room.h"

int mt_cmd_eval(mt_options *o) {
    mt_status s;
    mt_config cfg = {0};
    mt_backend *be = NULL;
    mt_model model = {0};
    mt_engine *eng = NULL;
    mt_data data = {0};
    mt_sink sink = {0};
    int32_t *inputs = NULL, *targets = NULL;
    int rc = 1;
    mt_precision prec;

    if ((s = mt_check_io_paths(o))) goto fail;
    if ((s = mt_thread_room_check(2, 2))) goto fail; // the engine's threads and OpenMP's (core/thread_room.h)
    if ((s = mt_setup_config(o, &cfg, 0)) || (s = mt_config_validate(&cfg, o->model))) goto fail;
    if ((s = mt_precision_parse(o->precision, &prec))) goto fail;
    if ((s = mt_data_open_file(&data, o->data, cfg.vocab_size, o->eng.B, o->eng.T))) goto fail; // a file only (options.c)
    // Default: every full, non-overlapping batch window of the file once; more than
    // that would read windows twice (or be cut short), so --steps past them is refused.
    size_t windows = (data.n - 1) / ((size_t)o->eng.B * o->eng.T);
    if (o->given.steps && (size_t)o->steps > windows) {
        s = mt_fail(MT_ERR_ARG, "eval --steps %d: %s holds %zu batch windows of --batch %d x --seq-len %d tokens (%zu "
                                "tokens); give at most --steps %zu, or leave --steps out to read them all",
                    o->steps, o->data, windows, o->eng.B, o->eng.T, data.n, windows);
        goto fail;
    }
    int steps = o->given.steps ? o->steps : windows > INT_MAX ? INT_MAX : (int)windows;
    mt_engine_opts eo = o->eng; // every schedule train takes, with the same knobs
    eo.grad_slabs = 1;          // forward only: no gradient leaves the device
    eo.grad_sum = MT_GRAD_SUM_BF16; // forward only: no gradient is summed, so no f32 buffer
    if ((s = mt_setup_backend(o->backend, o->hardware, prec, &be)) || (s = mt_setup_attention(be, o->attention)) ||
        (s = mt_engine_check_host_memory(&cfg, prec, &eo, be)) || (s = mt_model_alloc(&model, &cfg, prec, be)))
        goto fail;
    mt_load_report rep = {.allow_unused = o->allow_unused};
    if ((s = mt_checkpoint_load_model(&model, o->model, &rep))) goto fail;
    mt_note_unused(&rep);
    if ((s = mt_engine_create(&model, be, &eo, &eng)) || (s = mt_sink_open(&sink, o->log, 0, mt_json_on_stdout(o))))
        goto fail;
    size_t n = (size_t)o->eng.B * o->eng.T;
    inputs = malloc(n * 4);
    targets = malloc(n * 4);
    if (!inputs || !targets) {
        s = mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the batch");
        goto fail;
    }
    double sum = 0;
    for (int i = 0; i < steps; i++) {
        double part;
        mt_data_next(&data, o->eng.B, o->eng.T, inputs, targets);
        if ((s = mt_engine_eval(eng, inputs, targets, &part))) goto fail;
        sum += part;
        if (!isfinite(sum)) break; // reported below; the rest cannot change it
        fprintf(stderr, "eval %d/%d\r", i + 1, steps);
    }
    fprintf(stderr, "\n");
    double loss = sum / ((double)steps * n);
    if (!isfinite(loss)) { // the weights are finite (checked on load), so they overflow in the forward pass
        s = mt_fail(MT_ERR_FORMAT, "eval: the loss of %s on %s is %s: its weights overflow in the forward pass",
                    o->model, o->data, isnan(loss) ? "nan" : "inf");
        goto fail;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "loss", loss);
    cJSON_AddNumberToObject(j, "tokens", (double)steps * n);
    char *text = cJSON_PrintUnformatted(j);
    s = text ? mt_sink_line(&sink, text) : mt_fail(MT_ERR_MEMORY, "eval: cannot format the JSON result");
    free(text);
    cJSON_Delete(j);
    if (s || (s = mt_sink_close(&sink))) goto fail; // the result is all eval makes: lost is an error
    if (!sink.to_stdout) // a person reads stdout: the result as a line, the JSON in --log
        printf("eval: loss %.4f (perplexity %.4g) over %.0f tokens%s%s\n", loss, exp(loss), (double)steps * n,
               o->log ? "; JSON in --log " : "", o->log ? o->log : "");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
done:
    mt_run_release(&(mt_run_parts){be, &model, eng, &data, &sink, inputs, targets, NULL, 0});
    mt_config_release(&cfg);
    return rc;
}
