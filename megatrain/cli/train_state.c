// train_state.c: JSON in and out with cJSON.
#include "cli/train_state.h"

#include "core/file_io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATE_FORMAT "megatrain-train-state"
#define STATE_VERSION 1

mt_status mt_train_state_save(const char *dir, const mt_train_state *s, const mt_options *o) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", STATE_FORMAT);
    cJSON_AddNumberToObject(j, "version", STATE_VERSION);
    cJSON_AddNumberToObject(j, "step", s->step);
    cJSON_AddNumberToObject(j, "data_cursor", (double)s->data_cursor);
    cJSON_AddStringToObject(j, "data", s->data);
    cJSON_AddNumberToObject(j, "seed", (double)o->seed);
    cJSON_AddStringToObject(j, "precision", o->precision);
    cJSON_AddStringToObject(j, "schedule", o->schedule);
    cJSON_AddNumberToObject(j, "batch", o->batch);
    cJSON_AddNumberToObject(j, "seq_len", o->seq_len);
    cJSON_AddNumberToObject(j, "grad_accum", o->grad_accum);
    cJSON_AddNumberToObject(j, "total_steps", o->steps);
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

    char path[1100];
    snprintf(path, sizeof path, "%s/train_state.json", dir);
    size_t tlen = strlen(text);
    text[tlen] = '\n'; // the terminating NUL's byte becomes the file's final newline
    mt_status st = mt_file_write_atomic(path, text, tlen + 1);
    free(text);
    return st;
}

static mt_status num(const cJSON *obj, const char *key, const char *path, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) return mt_fail(MT_ERR_FORMAT, "%s: missing or non-numeric field '%s'", path, key);
    *out = v->valuedouble;
    return MT_OK;
}

static mt_status str(const cJSON *obj, const char *key, const char *path, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v)) return mt_fail(MT_ERR_FORMAT, "%s: missing or non-string field '%s'", path, key);
    *out = v->valuestring;
    return MT_OK;
}

mt_status mt_train_state_load(const char *dir, mt_train_state *s, mt_options *o, char **strings, int n_strings) {
    char path[1100];
    snprintf(path, sizeof path, "%s/train_state.json", dir);
    char *text;
    size_t len;
    MT_TRY(mt_file_read_text(path, "a megatrain train state", 1 << 20, &text, &len));
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return mt_fail(MT_ERR_FORMAT, "%s: not a JSON object", path);
    }
    mt_status st = MT_OK;
    const char *fmt = NULL, *data = NULL, *prec = NULL, *sched = NULL;
    double step = 0, cursor = 0, version = 0, seed = 0, batch = 0, seq = 0, accum = 0, total = 0;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hparams");
    if ((st = str(j, "format", path, &fmt)) || strcmp(fmt, STATE_FORMAT)) {
        if (!st) st = mt_fail(MT_ERR_FORMAT, "%s: not a megatrain train state (format '%s')", path, fmt);
    } else if ((st = num(j, "version", path, &version)) || version != STATE_VERSION) {
        if (!st) st = mt_fail(MT_ERR_FORMAT, "%s: unsupported version %g (expected %d)", path, version, STATE_VERSION);
    } else if (!(st = num(j, "step", path, &step)) && !(st = num(j, "data_cursor", path, &cursor)) &&
               !(st = str(j, "data", path, &data)) && !(st = num(j, "seed", path, &seed)) &&
               !(st = str(j, "precision", path, &prec)) && !(st = str(j, "schedule", path, &sched)) &&
               !(st = num(j, "batch", path, &batch)) && !(st = num(j, "seq_len", path, &seq)) &&
               !(st = num(j, "grad_accum", path, &accum)) && !(st = num(j, "total_steps", path, &total))) {
        if (!cJSON_IsObject(h)) st = mt_fail(MT_ERR_FORMAT, "%s: missing object 'hparams'", path);
        double v[7];
        const char *keys[] = {"lr", "weight_decay", "beta1", "beta2", "eps", "grad_clip", "warmup"};
        for (int i = 0; i < 7 && st == MT_OK; i++) st = num(h, keys[i], path, &v[i]);
        const char *lrs = NULL;
        if (st == MT_OK) st = str(h, "lr_schedule", path, &lrs);
        if (st == MT_OK && (step < 0 || cursor < 0 || batch < 1 || seq < 1 || accum < 1))
            st = mt_fail(MT_ERR_FORMAT, "%s: negative or zero step/cursor/batch/seq_len/grad_accum", path);
        if (st == MT_OK && n_strings >= 3) {
            s->step = (int)step;
            s->data_cursor = (size_t)cursor;
            snprintf(s->data, sizeof s->data, "%s", data);
            strings[0] = strdup(data);
            strings[1] = strdup(prec);
            strings[2] = strdup(lrs);
            if (!o->given.data) o->data = strings[0];
            if (!o->given.precision) o->precision = strings[1];
            if (!o->given.lr_schedule) o->lr_schedule = strings[2];
            if (!o->given.seed) o->seed = (unsigned long long)seed;
            if (!o->given.batch) o->batch = (int)batch;
            if (!o->given.seq_len) o->seq_len = (int)seq;
            if (!o->given.grad_accum) o->grad_accum = (int)accum;
            if (!o->given.lr) o->lr = (float)v[0];
            if (!o->given.weight_decay) o->weight_decay = (float)v[1];
            if (!o->given.beta1) o->beta1 = (float)v[2];
            if (!o->given.beta2) o->beta2 = (float)v[3];
            if (!o->given.eps) o->eps = (float)v[4];
            if (!o->given.grad_clip) o->grad_clip = (float)v[5];
            if (!o->given.warmup) o->warmup = (int)v[6];
        }
    }
    cJSON_Delete(j);
    return st;
}
