// safetensors_read.c: opens safetensors weights (one file, a sharded
// model.safetensors.index.json, or an HF directory) and validates every header
// field against the file before any tensor is read. Reads use pread, so
// mt_st_read may run concurrently from several threads on one handle.
#define _POSIX_C_SOURCE 200809L // pread, fsync, O_CLOEXEC under -std=c11
#include "model/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/file_io.h"
#include "core/json_file.h"

// The safetensors spec caps the header at 100 MB: a larger length is corruption.
#define MT_ST_MAX_HEADER_BYTES ((uint64_t)100 << 20)
// An index json is a name -> shard map; anything this big is not one.
#define MT_ST_MAX_INDEX_BYTES ((size_t)64 << 20)
// cJSON holds numbers as doubles: integers above 2^53 are not exact.
#define MT_ST_MAX_JSON_INT 9007199254740992.0
// Largest single pread/bounce chunk (Linux caps one read at ~2 GiB anyway).
#define MT_ST_IO_CHUNK ((size_t)1 << 30)
#define MT_ST_CONVERT_ELEMS ((size_t)1 << 20)

struct mt_safetensors {
    char *source; // what was opened: the .safetensors file or the index (mt_st_source)
    int nfiles;
    char **paths;
    int *fds;
    int ntensors, cap;
    mt_st_tensor *tensors; // sorted by name once opened (mt_st_find bisects)
};

// ----------------------------------------------------------------------------
// small helpers

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

// Reads exactly n bytes at off; short reads and EINTR are retried.
static mt_status pread_full(int fd, void *buf, size_t n, size_t off, const char *path) {
    char *p = buf;
    while (n > 0) {
        size_t want = n < MT_ST_IO_CHUNK ? n : MT_ST_IO_CHUNK;
        ssize_t r = pread(fd, p, want, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return mt_fail(MT_ERR_IO, "%s: read failed at byte %zu: %s", path, off, strerror(errno));
        }
        if (r == 0)
            return mt_fail(MT_ERR_FORMAT, "%s: unexpected end of file at byte %zu (file truncated?)", path, off);
        p += r;
        off += (size_t)r;
        n -= (size_t)r;
    }
    return MT_OK;
}

// A JSON number that is an exact non-negative integer cJSON can represent.
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0) || d > MT_ST_MAX_JSON_INT || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const mt_st_tensor *)a)->name, ((const mt_st_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b) {
    const mt_st_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static mt_status add_file(mt_safetensors *st, const char *path, int *file_out) {
    int fd;
    MT_TRY(mt_file_open_regular(path, "a safetensors file", &fd, NULL)); // a FIFO would block the open forever
    char **paths = realloc(st->paths, (size_t)(st->nfiles + 1) * sizeof *paths);
    if (paths) st->paths = paths;
    int *fds = paths ? realloc(st->fds, (size_t)(st->nfiles + 1) * sizeof *fds) : NULL;
    if (fds) st->fds = fds;
    char *copy = fds ? dup_str(path) : NULL;
    if (!copy) {
        close(fd);
        return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    }
    st->paths[st->nfiles] = copy;
    st->fds[st->nfiles] = fd;
    *file_out = st->nfiles++;
    return MT_OK;
}

static mt_status push_tensor(mt_safetensors *st, const mt_st_tensor *t, const char *path) {
    if (st->ntensors == st->cap) {
        int cap = st->cap ? 2 * st->cap : 64;
        mt_st_tensor *p = realloc(st->tensors, (size_t)cap * sizeof *p);
        if (!p) return mt_fail(MT_ERR_MEMORY, "%s: out of memory for the tensor table", path);
        st->tensors = p;
        st->cap = cap;
    }
    st->tensors[st->ntensors] = *t;
    st->tensors[st->ntensors].name = dup_str(t->name);
    if (!st->tensors[st->ntensors].name) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    st->ntensors++;
    return MT_OK;
}

// ----------------------------------------------------------------------------
// one .safetensors file: u64 LE header length, JSON header, data buffer

static mt_status parse_entry(mt_safetensors *st, int file, const char *path, const cJSON *item,
                             size_t data_start, size_t data_len) {
    const char *name = item->string;
    if (!cJSON_IsObject(item))
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': header entry is not a JSON object", path, name);
    mt_st_tensor t = {0};
    t.name = (char *)name;
    t.file = file;

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    if (!cJSON_IsString(dt))
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    if (strcmp(dt->valuestring, "F32") == 0) t.dtype = MT_F32;
    else if (strcmp(dt->valuestring, "BF16") == 0) t.dtype = MT_BF16;
    else if (strcmp(dt->valuestring, "F16") == 0) t.dtype = MT_F16; // widened on read (mt_st_read)
    else
        return mt_fail(MT_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (F32, BF16 and F16)",
                       path, name, dt->valuestring);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    if (!cJSON_IsArray(shape))
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
    int nd = cJSON_GetArraySize(shape);
    if (nd > MT_ST_MAX_DIMS)
        return mt_fail(MT_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d supported)", path, name,
                       nd, MT_ST_MAX_DIMS);
    t.ndim = nd;
    t.numel = 1;
    int d = 0;
    for (const cJSON *e = shape->child; e; e = e->next, d++) {
        uint64_t v;
        if (!json_uint(e, &v))
            return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", path,
                           name, d);
        if (v != 0 && t.numel > SIZE_MAX / v)
            return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': shape overflows size_t", path, name);
        t.shape[d] = (int64_t)v;
        t.numel *= (size_t)v;
    }
    size_t esz = mt_dtype_size(t.dtype);
    if (t.numel > SIZE_MAX / esz)
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': shape overflows size_t", path, name);

    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &begin) ||
        !json_uint(offs->child->next, &end))
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end] of non-negative integers",
                       path, name);
    if (begin > end)
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", path,
                       name, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_len)
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] lie outside the %zu-byte data buffer",
                       path, name, (unsigned long long)begin, (unsigned long long)end, data_len);
    t.nbytes = (size_t)(end - begin);
    if (t.nbytes != t.numel * esz)
        return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': data_offsets span %zu bytes but %zu %s elements need %zu",
                       path, name, t.nbytes, t.numel, dt->valuestring, t.numel * esz);
    t.offset = data_start + (size_t)begin;
    return push_tensor(st, &t, path);
}

static mt_status check_metadata(const char *path, const cJSON *meta) {
    if (!cJSON_IsObject(meta))
        return mt_fail(MT_ERR_FORMAT, "%s: \"__metadata__\" is not a JSON object", path);
    for (const cJSON *e = meta->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return mt_fail(MT_ERR_FORMAT, "%s: __metadata__.%s is not a string", path, e->string);
        for (const cJSON *d = meta->child; d != e; d = d->next) // a few keys: pairwise is fine
            if (!strcmp(d->string, e->string))
                return mt_fail(MT_ERR_FORMAT, "%s: __metadata__.%s appears twice (keys must be unique)", path,
                               e->string);
    }
    return MT_OK;
}

// A key given twice inside one tensor's entry ("dtype" twice): readers disagree on which counts.
static mt_status check_entry_keys(const char *path, const cJSON *item) {
    for (const cJSON *e = item->child; e; e = e->next)
        for (const cJSON *d = item->child; d != e; d = d->next)
            if (d->string && e->string && !strcmp(d->string, e->string))
                return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s': key \"%s\" appears twice", path, item->string,
                               e->string);
    return MT_OK;
}

// A tensor name given twice in one header: named as such, before the offsets are
// compared (two entries with the same offsets would read as an overlap).
static mt_status check_names_unique(const char *path, mt_st_tensor *ts, int n) {
    if (n > 1) qsort(ts, (size_t)n, sizeof *ts, cmp_name);
    for (int i = 1; i < n; i++)
        if (strcmp(ts[i - 1].name, ts[i].name) == 0)
            return mt_fail(MT_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", path, ts[i].name);
    return MT_OK;
}

// Sorted by offset, the tensors must tile the data buffer exactly: no overlap, no gap,
// nothing after the last one (what the reference Rust implementation enforces).
static mt_status check_coverage(const char *path, mt_st_tensor *ts, int n, size_t data_start, size_t file_size) {
    if (n > 1) qsort(ts, (size_t)n, sizeof *ts, cmp_offset);
    size_t expect = data_start;
    for (int i = 0; i < n; i++) {
        if (ts[i].offset < expect)
            return mt_fail(MT_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data buffer", path,
                           ts[i - 1].name, ts[i].name);
        if (ts[i].offset > expect)
            return mt_fail(MT_ERR_FORMAT, "%s: data bytes [%zu, %zu) before tensor '%s' belong to no tensor", path,
                           expect - data_start, ts[i].offset - data_start, ts[i].name);
        expect = ts[i].offset + ts[i].nbytes;
    }
    if (expect != file_size)
        return mt_fail(MT_ERR_FORMAT, "%s: %zu trailing bytes after the last tensor's data", path, file_size - expect);
    return MT_OK;
}

static mt_status parse_file(mt_safetensors *st, const char *path) {
    int file = -1;
    MT_TRY(add_file(st, path, &file));
    int fd = st->fds[file];
    struct stat sb;
    if (fstat(fd, &sb) != 0) return mt_fail(MT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    size_t fsize = (size_t)sb.st_size;
    if (fsize < 8)
        return mt_fail(MT_ERR_FORMAT, "%s: file is %zu bytes, too short for a safetensors header", path, fsize);
    unsigned char lb[8];
    MT_TRY(pread_full(fd, lb, 8, 0, path));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lb[i];
    if (hlen == 0 || hlen > fsize - 8)
        return mt_fail(MT_ERR_FORMAT, "%s: header length %llu does not fit in the %zu-byte file", path,
                       (unsigned long long)hlen, fsize);
    if (hlen > MT_ST_MAX_HEADER_BYTES)
        return mt_fail(MT_ERR_FORMAT, "%s: header length %llu exceeds the 100 MB limit", path,
                       (unsigned long long)hlen);

    char *h = malloc((size_t)hlen + 1);
    if (!h) return mt_fail(MT_ERR_MEMORY, "%s: out of memory for a %llu-byte header", path, (unsigned long long)hlen);
    mt_status s = pread_full(fd, h, (size_t)hlen, 8, path);
    if (s != MT_OK) {
        free(h);
        return s;
    }
    h[hlen] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)hlen, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - h) : 0;
        free(h);
        return mt_fail(MT_ERR_FORMAT, "%s: header is not valid JSON (error near header byte %zu)", path, at);
    }
    // The spec allows trailing spaces as padding; anything else after the JSON is garbage.
    for (const char *p = end; p < h + hlen; p++) {
        if (!is_json_space(*p)) {
            size_t at = (size_t)(p - h);
            cJSON_Delete(root);
            free(h);
            return mt_fail(MT_ERR_FORMAT, "%s: unexpected bytes after the header JSON (header byte %zu)", path, at);
        }
    }
    free(h);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return mt_fail(MT_ERR_FORMAT, "%s: header is not a JSON object", path);
    }
    size_t data_start = 8 + (size_t)hlen, data_len = fsize - data_start;
    int first = st->ntensors;
    s = MT_OK;
    for (const cJSON *e = root->child; e && s == MT_OK; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            for (const cJSON *d = root->child; d != e && s == MT_OK; d = d->next)
                if (!strcmp(d->string, "__metadata__"))
                    s = mt_fail(MT_ERR_FORMAT, "%s: \"__metadata__\" appears twice", path);
            if (s == MT_OK) s = check_metadata(path, e);
        } else {
            s = check_entry_keys(path, e);
            if (s == MT_OK) s = parse_entry(st, file, path, e, data_start, data_len);
        }
    }
    cJSON_Delete(root);
    MT_TRY(s);
    MT_TRY(check_names_unique(path, st->tensors + first, st->ntensors - first));
    return check_coverage(path, st->tensors + first, st->ntensors - first, data_start, fsize);
}

// ----------------------------------------------------------------------------
// sharded: model.safetensors.index.json {"weight_map": {name: shard file}}

static mt_status read_small_file(const char *path, size_t max, char **out, size_t *len) {
    int fd;
    struct stat sb;
    MT_TRY(mt_file_open_regular(path, "a safetensors index", &fd, &sb));
    if ((size_t)sb.st_size > max) {
        close(fd);
        return mt_fail(MT_ERR_FORMAT, "%s: %lld bytes is too large for an index file", path, (long long)sb.st_size);
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        close(fd);
        return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    }
    mt_status s = pread_full(fd, buf, (size_t)sb.st_size, 0, path);
    close(fd);
    if (s != MT_OK) {
        free(buf);
        return s;
    }
    buf[sb.st_size] = 0;
    *out = buf;
    *len = (size_t)sb.st_size;
    return MT_OK;
}

static mt_status check_weight_map(mt_safetensors *st, const char *path, const cJSON *wm, const char *dir) {
    for (const cJSON *e = wm->child; e; e = e->next) {
        const mt_st_tensor *t = mt_st_find(st, e->string);
        char *want = join_path(dir, e->valuestring);
        if (!want) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
        if (!t) {
            mt_status s = mt_fail(MT_ERR_FORMAT, "%s: tensor '%s' is mapped to %s, which has no such tensor", path,
                                  e->string, want);
            free(want);
            return s;
        }
        if (strcmp(st->paths[t->file], want) != 0) {
            mt_status s = mt_fail(MT_ERR_FORMAT, "%s: tensor '%s' is mapped to %s but found in %s", path, e->string,
                                  want, st->paths[t->file]);
            free(want);
            return s;
        }
        free(want);
    }
    return MT_OK;
}

static mt_status parse_index(mt_safetensors *st, const char *path) {
    if (!(st->source = dup_str(path))) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    char *text = NULL;
    size_t len = 0;
    MT_TRY(read_small_file(path, MT_ST_MAX_INDEX_BYTES, &text, &len));
    cJSON *root = NULL;
    mt_status ps = mt_json_parse(path, text, len, &root); // no trailing text, no key twice
    free(text);
    if (ps != MT_OK) return ps;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return mt_fail(MT_ERR_FORMAT, "%s: no \"weight_map\" object", path);
    }
    if (!wm->child) {
        cJSON_Delete(root);
        return mt_fail(MT_ERR_FORMAT, "%s: \"weight_map\" is empty: the index names no tensor and no shard", path);
    }
    // Shards live next to the index.
    char *dir = dup_str(path);
    if (!dir) {
        cJSON_Delete(root);
        return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    }
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else strcpy(dir, ".");

    mt_status s = MT_OK;
    for (const cJSON *e = wm->child; e && s == MT_OK; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring[0] || strchr(e->valuestring, '/')) {
            s = mt_fail(MT_ERR_FORMAT, "%s: weight_map['%s'] must be a shard file name in the same directory", path,
                        e->string);
            break;
        }
        char *shard = join_path(dir, e->valuestring);
        if (!shard) {
            s = mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
            break;
        }
        int seen = 0;
        for (int f = 0; f < st->nfiles && !seen; f++) seen = strcmp(st->paths[f], shard) == 0;
        struct stat sb;
        if (!seen && stat(shard, &sb) != 0)
            s = mt_fail(MT_ERR_IO, "%s: weight_map['%s'] names %s, which cannot be opened: %s", path, e->string,
                        shard, strerror(errno));
        else if (!seen) s = parse_file(st, shard);
        free(shard);
    }
    if (s == MT_OK) {
        if (st->ntensors > 1) qsort(st->tensors, (size_t)st->ntensors, sizeof *st->tensors, cmp_name);
        for (int i = 1; i < st->ntensors && s == MT_OK; i++)
            if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
                s = mt_fail(MT_ERR_FORMAT, "%s: tensor '%s' appears in both %s and %s", path, st->tensors[i].name,
                            st->paths[st->tensors[i - 1].file], st->paths[st->tensors[i].file]);
    }
    if (s == MT_OK) s = check_weight_map(st, path, wm, dir);
    free(dir);
    cJSON_Delete(root);
    return s;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

// A single file: parse, then sort by name for mt_st_find.
static mt_status open_single(mt_safetensors *st, const char *path) {
    if (!(st->source = dup_str(path))) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    MT_TRY(parse_file(st, path)); // names checked unique there
    if (st->ntensors > 1) qsort(st->tensors, (size_t)st->ntensors, sizeof *st->tensors, cmp_name);
    return MT_OK;
}

static mt_status open_any(mt_safetensors *st, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return mt_fail(MT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        char *single = join_path(path, "model.safetensors");
        char *index = join_path(path, "model.safetensors.index.json");
        mt_status s;
        if (!single || !index) s = mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
        else if (stat(single, &sb) == 0) s = open_single(st, single);
        else if (stat(index, &sb) == 0) s = parse_index(st, index);
        else s = mt_fail(MT_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json in this directory", path);
        free(single);
        free(index);
        return s;
    }
    if (ends_with(path, ".json")) return parse_index(st, path);
    return open_single(st, path);
}

// ----------------------------------------------------------------------------
// public API

mt_status mt_st_open(const char *path, mt_safetensors **out) {
    if (!path || !out) return mt_fail(MT_ERR_ARG, "mt_st_open: NULL argument");
    *out = NULL;
    mt_safetensors *st = calloc(1, sizeof *st);
    if (!st) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    mt_status s = open_any(st, path);
    if (s != MT_OK) {
        mt_st_close(st);
        return s;
    }
    *out = st;
    return MT_OK;
}

void mt_st_close(mt_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->nfiles; i++) {
        close(st->fds[i]);
        free(st->paths[i]);
    }
    for (int i = 0; i < st->ntensors; i++) free(st->tensors[i].name);
    free(st->paths);
    free(st->source);
    free(st->fds);
    free(st->tensors);
    free(st);
}

int mt_st_count(const mt_safetensors *st) { return st ? st->ntensors : 0; }

const mt_st_tensor *mt_st_get(const mt_safetensors *st, int i) {
    return st && i >= 0 && i < st->ntensors ? &st->tensors[i] : NULL;
}

const mt_st_tensor *mt_st_find(const mt_safetensors *st, const char *name) {
    if (!st || !name || st->ntensors == 0) return NULL;
    mt_st_tensor key = {.name = (char *)name};
    return bsearch(&key, st->tensors, (size_t)st->ntensors, sizeof key, cmp_name);
}

const char *mt_st_source(const mt_safetensors *st) { return st && st->source ? st->source : "?"; }

const char *mt_st_path(const mt_safetensors *st, int file) {
    return st && file >= 0 && file < st->nfiles ? st->paths[file] : "?";
}

static void format_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

mt_status mt_st_expect_shape(const mt_safetensors *st, const mt_st_tensor *t, int ndim, const int64_t *shape) {
    if (!st || !t || ndim < 0 || ndim > MT_ST_MAX_DIMS || (ndim > 0 && !shape))
        return mt_fail(MT_ERR_ARG, "mt_st_expect_shape: bad argument");
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (same) return MT_OK;
    char want[160], got[160];
    format_shape(want, sizeof want, ndim, shape);
    format_shape(got, sizeof got, t->ndim, t->shape);
    return mt_fail(MT_ERR_SHAPE, "%s: tensor '%s': expected shape %s, found %s", mt_st_path(st, t->file), t->name,
                   want, got);
}

mt_status mt_st_read(const mt_safetensors *st, const mt_st_tensor *t, void *dst, mt_dtype dst_dtype) {
    return mt_st_read_sum(st, t, dst, dst_dtype, NULL);
}

mt_status mt_st_read_sum(const mt_safetensors *st, const mt_st_tensor *t, void *dst, mt_dtype dst_dtype,
                         uint32_t *crc) {
    if (!st || !t || (!dst && t->numel > 0) || t->file < 0 || t->file >= st->nfiles)
        return mt_fail(MT_ERR_ARG, "mt_st_read: bad argument");
    if (dst_dtype != MT_F32 && dst_dtype != MT_BF16)
        return mt_fail(MT_ERR_ARG, "%s: tensor '%s': bad destination dtype %d", st->paths[t->file], t->name,
                       (int)dst_dtype);
    int fd = st->fds[t->file];
    const char *path = st->paths[t->file];
    uLong c = crc32_z(0, Z_NULL, 0);
    if (t->dtype == dst_dtype) {
        MT_TRY(pread_full(fd, dst, t->nbytes, t->offset, path));
        if (crc) *crc = (uint32_t)crc32_z(c, dst, t->nbytes); // dst holds the file's bytes
        return MT_OK;
    }
    // Convert through a bounded bounce buffer rather than a second full copy.
    size_t ssz = mt_dtype_size(t->dtype), dsz = mt_dtype_size(dst_dtype);
    size_t chunk = t->numel < MT_ST_CONVERT_ELEMS ? t->numel : MT_ST_CONVERT_ELEMS;
    void *buf = malloc(chunk * ssz);
    if (!buf && chunk) return mt_fail(MT_ERR_MEMORY, "%s: tensor '%s': out of memory", path, t->name);
    mt_status s = MT_OK;
    for (size_t done = 0; done < t->numel && s == MT_OK; done += chunk) {
        size_t n = t->numel - done < chunk ? t->numel - done : chunk;
        s = pread_full(fd, buf, n * ssz, t->offset + done * ssz, path);
        if (s == MT_OK && crc) c = crc32_z(c, buf, n * ssz);
        if (s == MT_OK) mt_convert((char *)dst + done * dsz, dst_dtype, buf, t->dtype, n);
    }
    free(buf);
    if (crc) *crc = (uint32_t)c;
    return s;
}
