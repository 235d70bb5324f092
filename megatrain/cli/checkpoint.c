// checkpoint.c: writing a checkpoint's files and checkpoint.json, and reading
// the manifest back with every field checked.
#include "cli/checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli/ckpt_dir.h"
#include "core/file_io.h"
#include "core/json_file.h"

#define MANIFEST_FORMAT "megatrain-checkpoint"
#define MANIFEST_VERSION 1
#define SMALL_FILE_MAX ((size_t)16 << 20) // config.json, train_state.json
#define MANIFEST_MAX ((size_t)256 << 20)

static const char *const SMALL[2] = {"config.json", "train_state.json"};
static const char *const TENSOR_FILES[2] = {"model.safetensors", "optimizer.safetensors"};

static const char *EDITED = "the file was changed after the save, or belongs to another checkpoint";

static void path_of(char *out, size_t cap, const char *dir, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

// ----------------------------------------------------------------------------
// writing

static mt_status small_file_entry(const char *dir, const char *name, cJSON *files) {
    char path[4200], hex[16];
    path_of(path, sizeof path, dir, name);
    char *text;
    size_t len;
    MT_TRY(mt_file_read_text(path, name, SMALL_FILE_MAX, &text, &len));
    snprintf(hex, sizeof hex, "%08lx", crc32_z(crc32_z(0, Z_NULL, 0), (const unsigned char *)text, len));
    free(text);
    cJSON *e = cJSON_AddObjectToObject(files, name);
    cJSON_AddNumberToObject(e, "bytes", (double)len);
    cJSON_AddStringToObject(e, "crc32", hex);
    return MT_OK;
}

static mt_status tensor_file_entry(const char *dir, const char *name, const mt_tensor_records *r, cJSON *files) {
    char path[4200], hex[16];
    path_of(path, sizeof path, dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0) return mt_fail(MT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    cJSON *e = cJSON_AddObjectToObject(files, name);
    cJSON_AddNumberToObject(e, "bytes", (double)sb.st_size);
    cJSON *ts = cJSON_AddObjectToObject(e, "tensors");
    for (int i = 0; i < r->n; i++) {
        const mt_tensor_record *t = &r->t[i];
        cJSON *o = cJSON_AddObjectToObject(ts, t->name);
        cJSON_AddStringToObject(o, "dtype", mt_dtype_name(t->dtype));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        snprintf(hex, sizeof hex, "%08x", (unsigned)t->crc32);
        cJSON_AddStringToObject(o, "crc32", hex);
    }
    return MT_OK;
}

mt_status mt_checkpoint_write(const char *dir, const mt_model *m, const mt_train_state *ts, const mt_options *o) {
    mt_ckpt_manifest man = {.step = ts->step};
    mt_status s = mt_model_save(m, dir, &man.weights, &man.moments);
    if (s == MT_OK) s = mt_train_state_save(dir, ts, o);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", MANIFEST_FORMAT);
    cJSON_AddNumberToObject(j, "version", MANIFEST_VERSION);
    cJSON_AddNumberToObject(j, "step", ts->step);
    cJSON *files = cJSON_AddObjectToObject(j, "files");
    for (int i = 0; i < 2 && s == MT_OK; i++) s = small_file_entry(dir, SMALL[i], files);
    if (s == MT_OK) s = tensor_file_entry(dir, TENSOR_FILES[0], &man.weights, files);
    if (s == MT_OK) s = tensor_file_entry(dir, TENSOR_FILES[1], &man.moments, files);
    char *text = s == MT_OK ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    mt_ckpt_manifest_free(&man);
    if (s != MT_OK) return s;
    if (!text) return mt_fail(MT_ERR_MEMORY, "%s/checkpoint.json: cannot format", dir);
    char path[4200];
    path_of(path, sizeof path, dir, "checkpoint.json");
    size_t len = strlen(text);
    text[len] = '\n'; // the NUL's byte becomes the final newline
    s = mt_file_write_atomic(path, text, len + 1);
    free(text);
    return s;
}

// ----------------------------------------------------------------------------
// reading

void mt_ckpt_manifest_free(mt_ckpt_manifest *man) {
    mt_tensor_records_free(&man->weights);
    mt_tensor_records_free(&man->moments);
}

int mt_checkpoint_present(const char *dir) {
    char path[4200];
    path_of(path, sizeof path, dir, "checkpoint.json");
    struct stat sb;
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && access(path, F_OK) == 0;
}

static int whole_number(const cJSON *v, double max, double *out) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > max || v->valuedouble != floor(v->valuedouble))
        return 0;
    *out = v->valuedouble;
    return 1;
}

static int parse_crc(const cJSON *v, uint32_t *out) {
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 8 || strspn(v->valuestring, "0123456789abcdef") != 8) return 0;
    *out = (uint32_t)strtoul(v->valuestring, NULL, 16);
    return 1;
}

// The file's entry in "files", with its size checked against the file on disk.
static mt_status file_entry(const char *mpath, const char *dir, const cJSON *files, const char *name,
                            const cJSON **out) {
    char path[4200];
    path_of(path, sizeof path, dir, name);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(files, name);
    double bytes;
    if (!cJSON_IsObject(e) || !whole_number(cJSON_GetObjectItemCaseSensitive(e, "bytes"), 9007199254740992.0, &bytes))
        return mt_fail(MT_ERR_FORMAT, "%s: files.%s: missing, or without a whole number of bytes", mpath, name);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return mt_fail(MT_ERR_IO, "%s: missing (checkpoint.json lists it): a partial checkpoint: %s", path,
                       strerror(errno));
    if ((double)sb.st_size != bytes)
        return mt_fail(MT_ERR_FORMAT, "%s: %lld bytes, but checkpoint.json records %.0f: %s", path,
                       (long long)sb.st_size, bytes, EDITED);
    *out = e;
    return MT_OK;
}

static mt_status check_small(const char *mpath, const char *dir, const cJSON *files, const char *name) {
    const cJSON *e;
    MT_TRY(file_entry(mpath, dir, files, name, &e));
    uint32_t want;
    if (!parse_crc(cJSON_GetObjectItemCaseSensitive(e, "crc32"), &want))
        return mt_fail(MT_ERR_FORMAT, "%s: files.%s.crc32: expected 8 lowercase hex digits", mpath, name);
    char path[4200], *text;
    size_t len;
    path_of(path, sizeof path, dir, name);
    MT_TRY(mt_file_read_text(path, name, SMALL_FILE_MAX, &text, &len));
    uint32_t got = (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), (const unsigned char *)text, len);
    free(text);
    if (got != want)
        return mt_fail(MT_ERR_FORMAT, "%s: CRC-32 %08x, but checkpoint.json records %08x: %s", path, (unsigned)got,
                       (unsigned)want, EDITED);
    return MT_OK;
}

static mt_status parse_tensors(const char *mpath, const char *dir, const cJSON *files, const char *name,
                               mt_tensor_records *r) {
    const cJSON *e;
    MT_TRY(file_entry(mpath, dir, files, name, &e));
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "tensors");
    if (!cJSON_IsObject(ts)) return mt_fail(MT_ERR_FORMAT, "%s: files.%s.tensors: missing or not an object", mpath, name);
    int n = cJSON_GetArraySize(ts);
    r->t = calloc((size_t)(n ? n : 1), sizeof *r->t);
    r->n = 0;
    if (!r->t) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", mpath);
    for (const cJSON *t = ts->child; t; t = t->next) {
        mt_tensor_record *x = &r->t[r->n];
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
        if (strlen(t->string) >= sizeof x->name || !cJSON_IsString(dt) || nd < 0 || nd > 2 ||
            !parse_crc(cJSON_GetObjectItemCaseSensitive(t, "crc32"), &x->crc32))
            return mt_fail(MT_ERR_FORMAT, "%s: files.%s.tensors.%s: expected {dtype, shape (at most 2 dims), crc32}",
                           mpath, name, t->string);
        if (!strcmp(dt->valuestring, "F32")) x->dtype = MT_F32;
        else if (!strcmp(dt->valuestring, "BF16")) x->dtype = MT_BF16;
        else
            return mt_fail(MT_ERR_FORMAT, "%s: files.%s.tensors.%s.dtype: '%s' (F32 or BF16)", mpath, name, t->string,
                           dt->valuestring);
        x->ndim = nd;
        int d = 0;
        for (const cJSON *v = shape->child; v; v = v->next, d++) {
            double dim;
            if (!whole_number(v, 9007199254740992.0, &dim))
                return mt_fail(MT_ERR_FORMAT, "%s: files.%s.tensors.%s.shape: not whole numbers", mpath, name, t->string);
            x->shape[d] = (int64_t)dim;
        }
        snprintf(x->name, sizeof x->name, "%s", t->string);
        r->n++;
    }
    mt_tensor_records_sort(r);
    return MT_OK;
}

static mt_status parse_manifest(const char *mpath, const char *dir, const cJSON *j, mt_ckpt_manifest *man) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format"), *ver = cJSON_GetObjectItemCaseSensitive(j, "version");
    if (!cJSON_IsObject(j) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, MANIFEST_FORMAT))
        return mt_fail(MT_ERR_FORMAT, "%s: not a megatrain checkpoint manifest (format is not \"%s\")", mpath,
                       MANIFEST_FORMAT);
    if (!cJSON_IsNumber(ver) || ver->valuedouble != MANIFEST_VERSION)
        return mt_fail(MT_ERR_FORMAT, "%s: version %g is not supported (expected %d)", mpath,
                       cJSON_IsNumber(ver) ? ver->valuedouble : -1.0, MANIFEST_VERSION);
    double step;
    if (!whole_number(cJSON_GetObjectItemCaseSensitive(j, "step"), 2147483647.0, &step))
        return mt_fail(MT_ERR_FORMAT, "%s: step: missing or not a whole number", mpath);
    man->step = (int)step;
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    if (!cJSON_IsObject(files)) return mt_fail(MT_ERR_FORMAT, "%s: files: missing or not an object", mpath);
    for (const cJSON *f = files->child; f; f = f->next) {
        int known = 0;
        for (int i = 0; i < 2; i++) known |= !strcmp(f->string, SMALL[i]) || !strcmp(f->string, TENSOR_FILES[i]);
        if (!known) return mt_fail(MT_ERR_FORMAT, "%s: files.%s: not a file of a megatrain checkpoint", mpath, f->string);
    }
    for (int i = 0; i < 2; i++) MT_TRY(check_small(mpath, dir, files, SMALL[i]));
    MT_TRY(parse_tensors(mpath, dir, files, TENSOR_FILES[0], &man->weights));
    return parse_tensors(mpath, dir, files, TENSOR_FILES[1], &man->moments);
}

mt_status mt_checkpoint_open(const char *dir, mt_ckpt_manifest *man) {
    memset(man, 0, sizeof *man);
    char mpath[4200], moved[4200];
    path_of(mpath, sizeof mpath, dir, "checkpoint.json");
    struct stat sb;
    if (stat(dir, &sb) != 0 && mt_ckpt_dir_find_moved(dir, moved, sizeof moved))
        return mt_fail(MT_ERR_IO, "%s: missing: a save was interrupted while switching checkpoints; the previous one "
                                  "is in %s (the next --save %s puts it back)",
                       dir, moved, dir);
    if (stat(dir, &sb) != 0) return mt_fail(MT_ERR_IO, "%s: cannot open the checkpoint: %s", dir, strerror(errno));
    if (access(mpath, F_OK) != 0)
        return mt_fail(MT_ERR_FORMAT, "%s: no checkpoint.json: not a complete megatrain checkpoint (a partial save, "
                                      "one from an older megatrain, or a directory megatrain did not write)",
                       dir);
    cJSON *j;
    MT_TRY(mt_json_load(mpath, "a megatrain checkpoint manifest", MANIFEST_MAX, &j));
    mt_status s = parse_manifest(mpath, dir, j, man);
    cJSON_Delete(j);
    if (s != MT_OK) mt_ckpt_manifest_free(man);
    return s;
}

mt_status mt_checkpoint_load_model(mt_model *m, const char *dir) {
    if (!mt_checkpoint_present(dir)) return mt_model_load_weights(m, dir, NULL);
    mt_ckpt_manifest man;
    mt_status s = mt_checkpoint_open(dir, &man);
    if (s == MT_OK) s = mt_model_load_weights(m, dir, &man.weights);
    mt_ckpt_manifest_free(&man);
    if (s != MT_OK && strstr(mt_last_error(), "checkpoint.json records")) { // a mismatch, not a damaged file
        char why[1024];
        snprintf(why, sizeof why, "%s", mt_last_error());
        s = mt_fail(s, "%s (a directory edited on purpose loads as a plain HF model once its checkpoint.json is "
                       "removed)", why);
    }
    return s;
}
