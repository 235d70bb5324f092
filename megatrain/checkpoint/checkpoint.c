// checkpoint.c: writing a checkpoint's files and checkpoint.json, and reading
// the manifest back with every field checked.
#include "checkpoint/checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint/ckpt_dir.h"
#include "core/env.h"
#include "core/file_io.h"
#include "core/json_file.h"

#define MANIFEST_FORMAT "megatrain-checkpoint"
#define MANIFEST_VERSION 1
#define SMALL_FILE_MAX ((size_t)16 << 20) // config.json, train_state.json
#define MANIFEST_MAX ((size_t)256 << 20)

static const char *const SMALL[2] = {"config.json", "train_state.json"}; // in every checkpoint
static const char *const INDEXES[2] = {"model.safetensors.index.json", "optimizer.safetensors.index.json"};

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

// One entry per tensor file of `r` (the records name their files), each with its size.
static mt_status tensor_file_entries(const char *dir, const mt_tensor_records *r, cJSON *files) {
    char path[4200], hex[16];
    for (int i = 0; i < r->n; i++) {
        const char *name = r->t[i].file;
        cJSON *e = cJSON_GetObjectItemCaseSensitive(files, name);
        if (!e) {
            path_of(path, sizeof path, dir, name);
            struct stat sb;
            if (stat(path, &sb) != 0) return mt_fail(MT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
            e = cJSON_AddObjectToObject(files, name);
            cJSON_AddNumberToObject(e, "bytes", (double)sb.st_size);
            cJSON_AddObjectToObject(e, "tensors");
        }
        const mt_tensor_record *t = &r->t[i];
        cJSON *o = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(e, "tensors"), t->name);
        cJSON_AddStringToObject(o, "dtype", mt_dtype_name(t->dtype));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        snprintf(hex, sizeof hex, "%08x", (unsigned)t->crc32);
        cJSON_AddStringToObject(o, "crc32", hex);
    }
    return MT_OK;
}

mt_status mt_checkpoint_write(const char *dir, const mt_model *m, int step, size_t shard_size_bytes,
                              mt_ckpt_state_writer write_state, void *ctx) {
    mt_ckpt_manifest man = {.step = step};
    mt_status s = mt_model_save(m, dir, shard_size_bytes, &man.weights, &man.moments);
    if (s == MT_OK) s = write_state(dir, ctx);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", MANIFEST_FORMAT);
    cJSON_AddNumberToObject(j, "version", MANIFEST_VERSION);
    cJSON_AddNumberToObject(j, "step", step);
    cJSON *files = cJSON_AddObjectToObject(j, "files");
    for (int i = 0; i < 2 && s == MT_OK; i++) s = small_file_entry(dir, SMALL[i], files);
    for (int i = 0; i < 2 && s == MT_OK; i++) { // a sharded save's indexes
        char path[4200];
        path_of(path, sizeof path, dir, INDEXES[i]);
        if (access(path, F_OK) == 0) s = small_file_entry(dir, INDEXES[i], files);
    }
    if (s == MT_OK) s = tensor_file_entries(dir, &man.weights, files);
    if (s == MT_OK) s = tensor_file_entries(dir, &man.moments, files);
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

// "1.31 MB", "220.45 GB": decimal units, as disks and --shard-size count.
static const char *human(size_t b, char *buf, size_t cap) {
    const char *units[] = {"bytes", "kB", "MB", "GB", "TB", "PB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1000 && u < 5) v /= 1000, u++;
    if (u == 0) snprintf(buf, cap, "%zu bytes", b);
    else snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

// Under `ulimit -f` a file past the limit fails its write (EFBIG): a save whose
// largest file cannot fit is refused before it is written. The average file of
// each kind is a lower bound on the largest, so nothing that fits is refused.
static mt_status check_file_limit(const mt_ckpt_dir *cd, const mt_save_bytes *sb) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return MT_OK;
    size_t wf = (size_t)sb->weight_files, of = (size_t)sb->optimizer_files;
    size_t w = wf ? (sb->weights_bytes + wf - 1) / wf : 0, m = of ? (sb->optimizer_bytes + of - 1) / of : 0;
    size_t big = w > m ? w : m;
    if (big <= (size_t)rl.rlim_cur) return MT_OK;
    char a[32];
    return mt_fail(MT_ERR_IO, "%s %s: a checkpoint file would hold at least %s (%zu bytes: the %s), over the file size "
                              "limit of %llu bytes this process runs under (RLIMIT_FSIZE, `ulimit -f` %llu). HINT: "
                              "raise it (`ulimit -f unlimited`), or --shard-size below it",
                   cd->option, cd->dir, human(big, a, sizeof a), big,
                   w >= m ? "weights" : "optimizer state", (unsigned long long)rl.rlim_cur,
                   (unsigned long long)rl.rlim_cur / 1024);
}

mt_status mt_checkpoint_check_space(const mt_ckpt_dir *cd, const mt_model *m, size_t shard_size_bytes) {
    if (mt_env_flag("MT_FAULT_NO_SPACE_CHECK")) return MT_OK; // test hook: reach the writes' own ENOSPC path
    mt_save_bytes sb;
    MT_TRY(mt_model_save_bytes(m, shard_size_bytes, &sb));
    MT_TRY(check_file_limit(cd, &sb));
    struct statvfs fs;
    if (statvfs(cd->parent, &fs) != 0) return MT_OK; // cannot tell: the writes report a full disk themselves
    // config.json, train_state.json and checkpoint.json (about 200 bytes per tensor
    // record) are small; every file rounds up to whole blocks.
    int files = sb.weight_files + sb.optimizer_files + 3;
    size_t small = (m->cfg.source_json ? strlen(m->cfg.source_json) : 0) + 8192 +
                   (size_t)m->n_units * MT_T_COUNT * 3 * 200;
    size_t block = fs.f_frsize ? fs.f_frsize : 4096;
    size_t need = sb.weights_bytes + sb.optimizer_bytes + small + (size_t)files * block;
    size_t have = (size_t)fs.f_bavail * block;
    if (need <= have) return MT_OK;
    char a[32], b[32], c[32], d[32], e[32];
    return mt_fail(MT_ERR_IO,
                   "%s %s: a checkpoint needs %s (weights %s in %d file%s, optimizer state %s in %d file%s, small files "
                   "and block rounding %s) but %s has %s free (%zu bytes free, %zu needed); a save is written complete "
                   "beside the previous checkpoint before it replaces it: free space or save elsewhere",
                   cd->option, cd->dir, human(need, a, sizeof a), human(sb.weights_bytes, b, sizeof b), sb.weight_files,
                   sb.weight_files > 1 ? "s" : "", human(sb.optimizer_bytes, c, sizeof c), sb.optimizer_files,
                   sb.optimizer_files > 1 ? "s" : "", human(small + (size_t)files * block, d, sizeof d), cd->parent,
                   human(have, e, sizeof e), have, need);
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
    if (!S_ISREG(sb.st_mode)) // its size means nothing, and reading a FIFO would block
        return mt_fail(MT_ERR_IO, "%s: not a regular file but %s", path, mt_file_kind(sb.st_mode));
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

// Appends the tensors of files.NAME (a weights or optimizer file) to r, each record
// naming its file.
static mt_status parse_tensors(const char *mpath, const char *dir, const cJSON *files, const char *name,
                               mt_tensor_records *r) {
    const cJSON *e;
    MT_TRY(file_entry(mpath, dir, files, name, &e));
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "tensors");
    if (!cJSON_IsObject(ts)) return mt_fail(MT_ERR_FORMAT, "%s: files.%s.tensors: missing or not an object", mpath, name);
    if (strlen(name) >= sizeof r->t[0].file)
        return mt_fail(MT_ERR_FORMAT, "%s: files.%s: name too long", mpath, name);
    int n = cJSON_GetArraySize(ts);
    mt_tensor_record *grown = realloc(r->t, (size_t)(r->n + n + 1) * sizeof *r->t);
    if (!grown) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", mpath);
    r->t = grown;
    for (const cJSON *t = ts->child; t; t = t->next) {
        mt_tensor_record *x = &r->t[r->n];
        memset(x, 0, sizeof *x);
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
        snprintf(x->file, sizeof x->file, "%s", name);
        r->n++;
    }
    return MT_OK;
}

// A stem's files are one STEM.safetensors, or shards 1..N of one N with the index.
static mt_status check_layout(const char *mpath, const cJSON *files, mt_ckpt_file_kind kind, const char *stem,
                              const char *index) {
    int single = 0, shards = 0, of = -1, mixed = 0;
    char one[64];
    snprintf(one, sizeof one, "%s.safetensors", stem);
    for (const cJSON *f = files->child; f; f = f->next) {
        if (mt_ckpt_file_of(f->string) != kind) continue;
        if (!strcmp(f->string, one)) {
            single++;
            continue;
        }
        int n = atoi(strstr(f->string, "-of-") + 4);
        mixed |= of >= 0 && n != of;
        of = n;
        shards++;
    }
    int has_index = cJSON_GetObjectItemCaseSensitive(files, index) != NULL;
    if (single == 1 && shards == 0 && !has_index) return MT_OK;
    if (single == 0 && shards > 0 && !mixed && shards == of && has_index) return MT_OK;
    return mt_fail(MT_ERR_FORMAT, "%s: files: the %s state is neither one %s nor shards 1..N of N with %s "
                                  "(%d single, %d shards, index %s): a partial or mixed checkpoint",
                   mpath, stem, one, index, single, shards, has_index ? "present" : "absent");
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
        mt_ckpt_file_kind k = mt_ckpt_file_of(f->string);
        if (k == MT_CKPT_FOREIGN || k == MT_CKPT_MANIFEST)
            return mt_fail(MT_ERR_FORMAT, "%s: files.%s: not a file of a megatrain checkpoint", mpath, f->string);
    }
    MT_TRY(check_layout(mpath, files, MT_CKPT_WEIGHTS, "model", INDEXES[0]));
    MT_TRY(check_layout(mpath, files, MT_CKPT_MOMENTS, "optimizer", INDEXES[1]));
    for (int i = 0; i < 2; i++) MT_TRY(check_small(mpath, dir, files, SMALL[i]));
    for (const cJSON *f = files->child; f; f = f->next) {
        mt_ckpt_file_kind k = mt_ckpt_file_of(f->string);
        if (k == MT_CKPT_SMALL && strcmp(f->string, SMALL[0]) && strcmp(f->string, SMALL[1]))
            MT_TRY(check_small(mpath, dir, files, f->string)); // an index
        else if (k == MT_CKPT_WEIGHTS || k == MT_CKPT_MOMENTS)
            MT_TRY(parse_tensors(mpath, dir, files, f->string, k == MT_CKPT_WEIGHTS ? &man->weights : &man->moments));
    }
    mt_tensor_records_sort(&man->weights);
    mt_tensor_records_sort(&man->moments);
    for (int w = 0; w < 2; w++) { // a tensor recorded twice (in two shards) is a damaged manifest
        const mt_tensor_records *r = w ? &man->moments : &man->weights;
        for (int i = 1; i < r->n; i++)
            if (!strcmp(r->t[i - 1].name, r->t[i].name))
                return mt_fail(MT_ERR_FORMAT, "%s: tensor %s is recorded in both %s and %s", mpath, r->t[i].name,
                               r->t[i - 1].file, r->t[i].file);
    }
    return MT_OK;
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

static mt_status load_model_once(mt_model *m, const char *dir, int attempt, mt_load_report *rep) {
    uint64_t pause_ms;
    if (!mt_checkpoint_present(dir)) return mt_model_load_weights(m, dir, NULL, rep);
    mt_ckpt_manifest man;
    mt_status s = mt_checkpoint_open(dir, &man);
    // Test hook: MT_FAULT_READ_PAUSE_MS=N holds the first read N ms between the
    // manifest and the tensors, so a test can make a concurrent save land there.
    if (s == MT_OK && attempt == 0 && mt_env_u64("MT_FAULT_READ_PAUSE_MS", 0, 600000, 0, &pause_ms) == MT_OK && pause_ms) usleep(1000u * (unsigned)pause_ms);
    if (s == MT_OK) s = mt_model_load_weights(m, dir, &man.weights, rep);
    mt_ckpt_manifest_free(&man);
    if (s != MT_OK && strstr(mt_last_error(), "checkpoint.json records")) { // a mismatch, not a damaged file
        char why[1024];
        snprintf(why, sizeof why, "%s", mt_last_error());
        s = mt_fail(s, "%s (a directory edited on purpose loads as a plain HF model once its checkpoint.json is "
                       "removed)", why);
    }
    return s;
}

// What a save changes: DIR is a new directory (its inode may be a freed one
// reused, so its times count too) holding a new checkpoint.json.
typedef struct {
    struct stat dir, manifest;
    int have_dir, have_manifest;
} dir_identity;

static void identify(const char *dir, dir_identity *id) {
    char path[4200];
    path_of(path, sizeof path, dir, "checkpoint.json");
    memset(id, 0, sizeof *id);
    id->have_dir = stat(dir, &id->dir) == 0;
    id->have_manifest = stat(path, &id->manifest) == 0;
}

static int same_stat(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int same_identity(const dir_identity *a, const dir_identity *b) {
    return a->have_dir && b->have_dir && a->have_manifest == b->have_manifest && same_stat(&a->dir, &b->dir) &&
           (!a->have_manifest || same_stat(&a->manifest, &b->manifest));
}

// A save switches a new directory in as DIR (or DIR is briefly absent on a
// filesystem without RENAME_EXCHANGE), so a read that fails while DIR changed
// under it raced a save: it reads again rather than call the checkpoint edited,
// and says so.
mt_status mt_checkpoint_load_model(mt_model *m, const char *dir, mt_load_report *rep) {
    enum { TRIES = 10 };
    for (int attempt = 0;; attempt++) {
        dir_identity a, b;
        identify(dir, &a);
        mt_status s = load_model_once(m, dir, attempt, rep);
        if (s == MT_OK) return MT_OK;
        identify(dir, &b);
        if (same_identity(&a, &b)) return s; // nothing switched: the error stands
        if (attempt + 1 == TRIES) {
            char why[1024];
            snprintf(why, sizeof why, "%s", mt_last_error());
            return mt_fail(s, "%s: a save was in progress: a new checkpoint was switched in while it was read, %d times; "
                              "read it when the save is done (the last read said: %s)",
                           dir, TRIES, why);
        }
        fprintf(stderr, "megatrain: note: %s: a save switched in a new checkpoint while it was read; reading it again\n",
                dir);
        usleep(20000u * (unsigned)(attempt + 1)); // a switch in progress (DIR absent) has its moment to finish
    }
}
