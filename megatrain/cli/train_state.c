// train_state.c: JSON in and out with cJSON; every field read back goes through
// the command line's own parser and checks.
#include "cli/train_state.h"

#include "core/file_io.h"
#include "core/json_file.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FORMAT "megatrain-train-state"
// 2: the seed is a decimal string (a JSON number cannot hold every 64-bit seed).
// 3: "data" is a file's absolute path, and data_tokens + data_crc32 identify the
//    tokens (a relative path read in another directory named other data).
#define STATE_VERSION 3
#define STATE_OLDEST 2 // still read: its data is checked where that is possible (mt_train_state_resume_data)

void mt_train_state_set_data(mt_train_state *s, const mt_data *d) {
    snprintf(s->data, sizeof s->data, "%s", d->path[0] ? d->path : d->source);
    s->data_id = d->has_crc;
    s->data_tokens = d->n;
    s->data_crc32 = d->crc32;
}

mt_status mt_train_state_save(const char *dir, const mt_train_state *s, const mt_options *o) {
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", o->seed);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", STATE_FORMAT);
    cJSON_AddNumberToObject(j, "version", STATE_VERSION);
    cJSON_AddNumberToObject(j, "step", s->step);
    cJSON_AddNumberToObject(j, "data_cursor", (double)s->data_cursor);
    cJSON_AddNumberToObject(j, "skipped_steps", s->skipped_steps);
    cJSON_AddStringToObject(j, "data", s->data);
    if (s->data_id) {
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)s->data_crc32);
        cJSON_AddNumberToObject(j, "data_tokens", (double)s->data_tokens);
        cJSON_AddStringToObject(j, "data_crc32", crc);
    }
    cJSON_AddStringToObject(j, "seed", seed);
    cJSON_AddStringToObject(j, "precision", o->precision);
    cJSON_AddStringToObject(j, "schedule", o->eng.schedule->name);
    cJSON_AddNumberToObject(j, "batch", o->eng.B);
    cJSON_AddNumberToObject(j, "seq_len", o->eng.T);
    cJSON_AddNumberToObject(j, "grad_accum", o->eng.grad_accum);
    cJSON_AddStringToObject(j, "speculative_step", o->eng.sched.speculative < 0 ? "auto" : o->eng.sched.speculative ? "true" : "false");
    cJSON_AddNumberToObject(j, "total_steps", o->steps);
    cJSON_AddStringToObject(j, "grad_accum_dtype", mt_grad_sum_name(o->eng.grad_sum)); // resolved: f32 or bf16
    cJSON *h = cJSON_AddObjectToObject(j, "hparams");
    cJSON_AddNumberToObject(h, "lr", o->lr);
    cJSON_AddNumberToObject(h, "weight_decay", o->weight_decay);
    cJSON_AddNumberToObject(h, "beta1", o->beta1);
    cJSON_AddNumberToObject(h, "beta2", o->beta2);
    cJSON_AddNumberToObject(h, "eps", o->eps);
    cJSON_AddNumberToObject(h, "grad_clip", o->grad_clip);
    cJSON_AddStringToObject(h, "lr_schedule", o->lr_schedule);
    cJSON_AddNumberToObject(h, "warmup", o->warmup);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return mt_fail(MT_ERR_MEMORY, "%s/train_state.json: cannot format", dir);

    char path[4200];
    snprintf(path, sizeof path, "%s/train_state.json", dir);
    size_t tlen = strlen(text);
    text[tlen] = '\n'; // the terminating NUL's byte becomes the file's final newline
    mt_status st = mt_file_write_atomic(path, text, tlen + 1);
    free(text);
    return st;
}

void mt_train_state_free(mt_train_state *s) {
    for (size_t i = 0; i < sizeof s->strings / sizeof *s->strings; i++) free(s->strings[i]);
    memset(s->strings, 0, sizeof s->strings);
}

// One field of the file -> one option, through the command line's parser.
typedef struct {
    const char *key;    // in the file; "hparams.lr" looks inside "hparams"
    const char *option; // what it stands for on the command line
} field_map;

static const field_map fields[] = {
    {"seed", "--seed"},           {"precision", "--precision"},        {"schedule", "--schedule"},
    {"batch", "--batch"},         {"seq_len", "--seq-len"},            {"grad_accum", "--grad-accum"},
    {"total_steps", "--steps"},   {"hparams.lr", "--lr"},              {"hparams.weight_decay", "--weight-decay"},
    {"hparams.beta1", "--beta1"}, {"hparams.beta2", "--beta2"},        {"hparams.eps", "--eps"},
    {"hparams.grad_clip", "--grad-clip"}, {"hparams.lr_schedule", "--lr-schedule"}, {"hparams.warmup", "--warmup"},
};

static const cJSON *lookup(const cJSON *root, const char *key) {
    const char *dot = strchr(key, '.');
    if (!dot) return cJSON_GetObjectItemCaseSensitive(root, key);
    char head[64];
    snprintf(head, sizeof head, "%.*s", (int)(dot - key), key);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, head);
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, dot + 1) : NULL;
}

// The field's value as the text a user would type: strings as they are, numbers
// in the shortest form that reads back to the same double ("1e+10", "2.5", "64").
static mt_status field_text(const char *path, const char *key, const cJSON *v, char *buf, size_t cap,
                            const char **out) {
    if (cJSON_IsString(v)) {
        *out = v->valuestring;
        return MT_OK;
    }
    if (!cJSON_IsNumber(v))
        return mt_fail(MT_ERR_FORMAT, "%s: %s: %s", path, key, v ? "expected a number or a string" : "missing field");
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v->valuedouble);
        if (strtod(buf, NULL) == v->valuedouble) break;
    }
    *out = buf;
    return MT_OK;
}

// An exact integer in [0, max] at key.
static mt_status whole(const char *path, const cJSON *root, const char *key, double max, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsNumber(v)) return mt_fail(MT_ERR_FORMAT, "%s: %s: missing or not a number", path, key);
    double d = v->valuedouble;
    if (!(d >= 0) || d > max || d != floor(d))
        return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a whole number in [0, %.0f], got %.17g", path, key, max, d);
    *out = d;
    return MT_OK;
}

static mt_status parse(const char *path, const cJSON *j, mt_train_state *s, mt_options *o) {
    if (!cJSON_IsObject(j)) return mt_fail(MT_ERR_FORMAT, "%s: not a JSON object", path);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, STATE_FORMAT))
        return mt_fail(MT_ERR_FORMAT, "%s: not a megatrain train state (format is not \"%s\")", path, STATE_FORMAT);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "version");
    if (!cJSON_IsNumber(ver)) return mt_fail(MT_ERR_FORMAT, "%s: version: missing or not a number", path);
    if (ver->valuedouble != floor(ver->valuedouble) || ver->valuedouble < STATE_OLDEST || ver->valuedouble > STATE_VERSION)
        return mt_fail(MT_ERR_FORMAT, "%s: version %g is not supported (expected %d..%d)", path, ver->valuedouble,
                       STATE_OLDEST, STATE_VERSION);
    s->version = (int)ver->valuedouble;
    double step = 0, cursor = 0;
    MT_TRY(whole(path, j, "step", 2147483647.0, &step));
    MT_TRY(whole(path, j, "data_cursor", 9007199254740992.0, &cursor)); // 2^53: exact in a double
    // Fields added after version 2 (optional: a state written before them reads as it did).
    double skipped = 0;
    if (cJSON_GetObjectItemCaseSensitive(j, "skipped_steps")) MT_TRY(whole(path, j, "skipped_steps", step, &skipped));
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "speculative_step");
    if (spec && !cJSON_IsString(spec)) return mt_fail(MT_ERR_FORMAT, "%s: speculative_step: expected a string", path);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    if (!cJSON_IsString(data) || !data->valuestring[0] || strlen(data->valuestring) >= sizeof s->data)
        return mt_fail(MT_ERR_FORMAT, "%s: data: expected the data source's name (a non-empty string)", path);
    // Version 3: a file or the embedded corpus is identified by its length and CRC-32.
    const cJSON *dcrc = cJSON_GetObjectItemCaseSensitive(j, "data_crc32");
    int synthetic = !strcmp(data->valuestring, "synthetic");
    if (s->version >= 3 && !synthetic) {
        double tokens = 0;
        MT_TRY(whole(path, j, "data_tokens", 9007199254740992.0, &tokens));
        char *end = NULL;
        unsigned long crc = cJSON_IsString(dcrc) ? strtoul(dcrc->valuestring, &end, 16) : 0;
        if (!cJSON_IsString(dcrc) || strlen(dcrc->valuestring) != 8 || *end || strspn(dcrc->valuestring, "0123456789abcdef") != 8)
            return mt_fail(MT_ERR_FORMAT, "%s: data_crc32: expected 8 lowercase hex digits", path);
        s->data_id = 1;
        s->data_tokens = (size_t)tokens;
        s->data_crc32 = (uint32_t)crc;
    }

    // Every field is validated, also those the command line overrides: a state
    // holding an impossible value is damaged, whatever this run would use.
    mt_options saved = *o;
    int n_str = 0;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        char num[40];
        const char *text;
        MT_TRY(field_text(path, fields[i].key, lookup(j, fields[i].key), num, sizeof num, &text));
        if (text != num) { // a string: the options keep a pointer to it
            if (n_str >= (int)(sizeof s->strings / sizeof *s->strings) - 1 || !(s->strings[n_str] = strdup(text)))
                return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
            text = s->strings[n_str++];
        }
        if (mt_options_set(&saved, fields[i].option, text) != MT_OK) {
            char why[900];
            const char *msg = mt_last_error();
            size_t k = strlen(fields[i].option);
            if (!strncmp(msg, fields[i].option, k) && !strncmp(msg + k, ": ", 2)) msg += k + 2; // "--lr: " is implied
            snprintf(why, sizeof why, "%s", msg);
            return mt_fail(MT_ERR_FORMAT, "%s: %s: %s", path, fields[i].key, why);
        }
    }
    // grad_accum_dtype: how chunked weight gradients were summed (optional: states saved
    // before it existed leave this run's choice alone).
    const cJSON *gad = cJSON_GetObjectItemCaseSensitive(j, "grad_accum_dtype");
    if (gad) {
        if (!cJSON_IsString(gad) || !strcmp(gad->valuestring, "auto") ||
            mt_options_set(&saved, "--grad-accum-dtype", gad->valuestring) != MT_OK)
            return mt_fail(MT_ERR_FORMAT, "%s: grad_accum_dtype: expected \"f32\" or \"bf16\"", path);
    }
    if (step > saved.steps)
        return mt_fail(MT_ERR_FORMAT, "%s: step %.0f is beyond total_steps %d", path, step, saved.steps);
    if (!(s->strings[n_str] = strdup(data->valuestring))) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    s->step = (int)step;
    s->data_cursor = (size_t)cursor;
    s->skipped_steps = (int)skipped;
    snprintf(s->data, sizeof s->data, "%s", data->valuestring);

    if (spec && mt_options_set(&saved, "--speculative-step", spec->valuestring) != MT_OK)
        return mt_fail(MT_ERR_FORMAT, "%s: speculative_step: %s", path, mt_last_error());

    // Apply what the command line did not give.
    if (!o->given.data) o->data = s->strings[n_str];
    if (!o->given.precision) o->precision = saved.precision;
    if (!o->given.lr_schedule) o->lr_schedule = saved.lr_schedule;
    s->seed = saved.seed;
    if (!o->given.seed) o->seed = saved.seed;
    if (!o->given.batch) o->eng.B = saved.eng.B;
    if (!o->given.seq_len) o->eng.T = saved.eng.T;
    if (!o->given.grad_accum) o->eng.grad_accum = saved.eng.grad_accum;
    if (!o->given.steps) o->steps = saved.steps;
    if (!o->given.lr) o->lr = saved.lr;
    if (!o->given.weight_decay) o->weight_decay = saved.weight_decay;
    if (!o->given.beta1) o->beta1 = saved.beta1;
    if (!o->given.beta2) o->beta2 = saved.beta2;
    if (!o->given.eps) o->eps = saved.eps;
    if (!o->given.grad_clip) o->grad_clip = saved.grad_clip;
    if (!o->given.warmup) o->warmup = saved.warmup;
    if (!o->given.speculative) o->eng.sched.speculative = saved.eng.sched.speculative;
    if (!o->given.grad_accum_dtype) o->eng.grad_sum = saved.eng.grad_sum;
    return MT_OK;
}

static const char *DATA_HINT = "a resume must read the same tokens to continue the same run. HINT: give --data "
                                "with the file the checkpoint recorded, or start a new run from these weights with "
                                "--model (the optimizer state is not carried)";

mt_status mt_train_state_resume_data(const char *dir, const mt_train_state *s, const mt_options *o, mt_data *d) {
    int was_synth = !strcmp(s->data, "synthetic"), is_synth = !strcmp(d->source, "synthetic");
    const char *now = d->path[0] ? d->path : d->source;
    if (was_synth != is_synth)
        return mt_fail(MT_ERR_ARG, "%s/train_state.json: the checkpoint was trained on %s, but this run reads %s: %s",
                       dir, s->data, now, DATA_HINT);
    if (was_synth && o->seed != s->seed) // synthetic ids are a function of the seed
        return mt_fail(MT_ERR_ARG, "--seed %llu: the checkpoint's synthetic data came from seed %llu, and a resume "
                                   "must read the same tokens; drop --seed", o->seed, s->seed);
    if (s->data_id) {
        if (!d->has_crc || d->n != s->data_tokens || d->crc32 != s->data_crc32)
            return mt_fail(MT_ERR_ARG,
                           "%s/train_state.json: the data changed: the checkpoint was trained on %s (%zu tokens, "
                           "CRC-32 %08x), but %s%s holds %zu tokens, CRC-32 %08x: %s",
                           dir, s->data, s->data_tokens, (unsigned)s->data_crc32, o->given.data ? "--data " : "", now,
                           d->n, (unsigned)d->crc32, DATA_HINT);
    } else if (!was_synth && strcmp(s->data, "embedded")) { // version 2, a file: recorded as typed, unchecked
        if (!o->given.data)
            return mt_fail(MT_ERR_ARG,
                           "%s/train_state.json: version %d records the data only as typed (%s), with no size or "
                           "checksum, so this resume cannot tell whether %s holds the tokens that run read. HINT: give "
                           "--data FILE naming that file (its next save records what identifies it)",
                           dir, s->version, s->data, now);
        fprintf(stderr, "megatrain: note: %s/train_state.json (version %d) cannot identify its data; reading --data %s "
                        "as the run's own\n", dir, s->version, d->source);
    }
    if (s->data_cursor >= d->n)
        return mt_fail(MT_ERR_FORMAT, "%s/train_state.json: data_cursor %zu is beyond the end of %s (%zu tokens)", dir,
                       s->data_cursor, now, d->n);
    d->cursor = s->data_cursor;
    return MT_OK;
}

mt_status mt_train_state_load(const char *dir, mt_train_state *s, mt_options *o) {
    char path[4200];
    snprintf(path, sizeof path, "%s/train_state.json", dir);
    cJSON *j;
    MT_TRY(mt_json_load(path, "a megatrain train state", 1 << 20, &j));
    mt_status st = parse(path, j, s, o);
    cJSON_Delete(j);
    if (st != MT_OK) mt_train_state_free(s);
    return st;
}
