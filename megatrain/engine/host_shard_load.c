// host_shard_load.c: a per-host save read back by any number of hosts (host_shard_save.h): each
// host reads only the pieces of the moments that overlap its slices, each piece whole, so its
// CRC-32 is checked against checkpoint.json's record.
#include "engine/host_shard_save.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file_io.h"
#include "core/json_file.h"
#include "engine/hosts.h"

#define INDEX_MAX ((size_t)256 << 20) // an index of a few million pieces

static mt_status load_index(const char *dir, cJSON **out, const cJSON **slices, char *path, size_t cap) {
    snprintf(path, cap, "%s/optimizer.safetensors.index.json", dir);
    *slices = NULL;
    MT_TRY(mt_json_load(path, "an optimizer index", INDEX_MAX, out));
    const cJSON *sl = cJSON_GetObjectItemCaseSensitive(*out, "slices");
    if (cJSON_IsObject(sl)) *slices = sl;
    return MT_OK;
}

mt_status mt_host_shard_saved_per_host(const char *dir, int *yes) {
    char path[4400];
    struct stat sb;
    *yes = 0;
    snprintf(path, sizeof path, "%s/optimizer.safetensors.index.json", dir);
    if (stat(path, &sb) != 0) return MT_OK; // one optimizer.safetensors: one host's layout
    cJSON *j;
    const cJSON *sl;
    MT_TRY(load_index(dir, &j, &sl, path, sizeof path));
    *yes = sl != NULL;
    cJSON_Delete(j);
    return MT_OK;
}

typedef struct {
    const char *name, *tensor;
    size_t start, stop;
} slice_ref;

static int cmp_slice(const void *a, const void *b) {
    const slice_ref *x = a, *y = b;
    int c = strcmp(x->tensor, y->tensor);
    return c ? c : x->start < y->start ? -1 : x->start > y->start;
}

static int whole(const cJSON *v, size_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(size_t)v->valuedouble)
        return 0;
    *out = (size_t)v->valuedouble;
    return 1;
}

static mt_status parse_slices(const char *path, const cJSON *sl, slice_ref **out, int *n) {
    int k = cJSON_GetArraySize(sl);
    slice_ref *r = calloc((size_t)(k ? k : 1), sizeof *r);
    if (!r) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    int i = 0;
    for (const cJSON *e = sl->child; e; e = e->next, i++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "tensor");
        r[i].name = e->string;
        if (!cJSON_IsString(t) || !whole(cJSON_GetObjectItemCaseSensitive(e, "start"), &r[i].start) ||
            !whole(cJSON_GetObjectItemCaseSensitive(e, "stop"), &r[i].stop) || r[i].stop <= r[i].start) {
            free(r);
            return mt_fail(MT_ERR_FORMAT, "%s: slices.%s: expected {tensor, start, stop} with start < stop", path,
                           e->string);
        }
        r[i].tensor = t->valuestring;
    }
    qsort(r, (size_t)k, sizeof *r, cmp_slice);
    *out = r;
    *n = k;
    return MT_OK;
}

// The pieces of `tensor` (numel elements) overlapping [a, b) into dst (the tensor's element 0).
static mt_status read_range(const mt_safetensors *st, const char *path, const slice_ref *r, int n, const char *tensor,
                            size_t numel, size_t a, size_t b, float *dst, int sq, const mt_tensor_records *expect,
                            float **buf, size_t *cap) {
    slice_ref key = {.tensor = tensor, .start = 0};
    int lo = 0, hi = n; // the first of tensor's pieces
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cmp_slice(&r[mid], &key) < 0) lo = mid + 1;
        else hi = mid;
    }
    size_t covered = 0;
    for (int i = lo; i < n && !strcmp(r[i].tensor, tensor); i++) {
        if (r[i].start != covered || r[i].stop > numel) break;
        covered = r[i].stop;
        if (r[i].stop <= a || r[i].start >= b) continue; // another host's: not read
        const mt_st_tensor *ti = mt_st_find(st, r[i].name);
        size_t len = r[i].stop - r[i].start;
        if (!ti) return mt_fail(MT_ERR_FORMAT, "%s: slices.%s: not in weight_map", path, r[i].name);
        if (ti->ndim != 1 || (size_t)ti->shape[0] != len)
            return mt_fail(MT_ERR_FORMAT, "%s: tensor %s: expected %zu elements in one dimension",
                           mt_st_path(st, ti->file), r[i].name, len);
        int inside = r[i].start >= a && r[i].stop <= b; // all of it this host's: read in place
        if (!inside && len > *cap) {
            float *g = realloc(*buf, len * sizeof *g);
            if (!g) return mt_fail(MT_ERR_MEMORY, "%s: out of memory reading %s", path, r[i].name);
            *buf = g, *cap = len;
        }
        float *to = inside ? dst + r[i].start : *buf;
        MT_TRY(mt_model_read_recorded(st, ti, to, MT_F32, expect));
        size_t x0 = r[i].start > a ? r[i].start : a, x1 = r[i].stop < b ? r[i].stop : b;
        for (size_t j = x0; j < x1; j++) {
            float val = to[j - r[i].start];
            if (sq && val < 0) // Adam divides by its square root
                return mt_fail(MT_ERR_FORMAT, "%s: tensor %s: %g at element %zu: exp_avg_sq cannot be negative",
                               mt_st_path(st, ti->file), r[i].name, val, j - r[i].start);
            dst[j] = val;
        }
    }
    if (covered != numel)
        return mt_fail(MT_ERR_FORMAT, "%s: the slices of %s cover elements [0, %zu) of its %zu, not all: a damaged "
                                      "index", path, tensor, covered, numel);
    return MT_OK;
}

mt_status mt_host_shard_load_optimizer(mt_model *m, const char *dir, const mt_tensor_records *expect) {
    char path[4400], hf[300];
    cJSON *j;
    const cJSON *sl;
    MT_TRY(load_index(dir, &j, &sl, path, sizeof path));
    slice_ref *r = NULL;
    int n = 0;
    mt_safetensors *st = NULL;
    mt_status s = sl ? parse_slices(path, sl, &r, &n) : mt_fail(MT_ERR_FORMAT, "%s: no \"slices\"", path);
    if (s == MT_OK) s = mt_st_open_stem(dir, "optimizer", &st);
    if (s == MT_OK && expect && mt_st_count(st) != expect->n)
        s = mt_fail(MT_ERR_FORMAT, "%s: holds %d tensors but checkpoint.json records %d: the file was changed or "
                                   "damaged after the save, or comes from another checkpoint",
                    path, mt_st_count(st), expect->n);
    int H = m->shards ? m->shards->hosts->n : 1, me = m->shards ? m->shards->hosts->rank : 0;
    float *buf = NULL;
    size_t cap = 0;
    for (int ui = 0; ui < m->n_units && s == MT_OK; ui++) {
        mt_unit *u = &m->units[ui];
        size_t off, cnt;
        mt_host_shard_range(u->lay->numel, H, me, &off, &cnt);
        for (int t = 0; t < MT_T_COUNT && s == MT_OK; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            if (!v->present) continue;
            size_t x0 = off > v->offset ? off : v->offset;
            size_t x1 = off + cnt < v->offset + v->numel ? off + cnt : v->offset + v->numel;
            size_t a = x1 > x0 ? x0 - v->offset : 0, b = x1 > x0 ? x1 - v->offset : 0; // this host's elements of it
            mt_layout_hf_name(u->lay, (mt_tensor_id)t, u->layer, hf, 256);
            size_t base = strlen(hf);
            for (int q = 0; q < 2 && s == MT_OK; q++) {
                snprintf(hf + base, sizeof hf - base, "%s", q == 0 ? ".exp_avg" : ".exp_avg_sq");
                s = read_range(st, path, r, n, hf, v->numel, a, b, (q == 0 ? u->m : u->v) + v->offset, q, expect,
                               &buf, &cap);
            }
        }
    }
    free(buf);
    if (st) mt_st_close(st);
    free(r);
    cJSON_Delete(j);
    return s;
}
