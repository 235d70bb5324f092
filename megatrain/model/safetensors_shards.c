// safetensors_shards.c: a tensor list written the way transformers' save_pretrained
// writes a large model: shards "STEM-00001-of-0000N.safetensors" of at most
// max_bytes of tensor data each, and "STEM.safetensors.index.json" mapping every
// tensor to its shard. One shard is written as a plain "STEM.safetensors" with no
// index, as transformers does.
#define _POSIX_C_SOURCE 200809L
#include "model/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file_io.h"

static size_t entry_bytes(const mt_st_entry *e) {
    size_t n = mt_dtype_size(e->file_dtype);
    for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

void mt_st_shard_name(const char *stem, int i, int n, char *out, size_t cap) {
    if (n <= 1) snprintf(out, cap, "%s.safetensors", stem);
    else snprintf(out, cap, "%s-%05d-of-%05d.safetensors", stem, i + 1, n);
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const mt_st_entry *const *)a)->name, (*(const mt_st_entry *const *)b)->name);
}

// The index text: metadata.total_size as an exact integer (cJSON would print a
// double), weight_map sorted by tensor name (as transformers writes it).
static char *index_text(const char *stem, const mt_st_entry *es, int n, const mt_st_shard_plan *p) {
    const mt_st_entry **sorted = malloc((size_t)(n ? n : 1) * sizeof *sorted);
    cJSON *root = cJSON_CreateObject();
    char total[32], file[300];
    if (!sorted || !root) {
        free(sorted);
        cJSON_Delete(root);
        return NULL;
    }
    for (int i = 0; i < n; i++) sorted[i] = &es[i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_entry_name);
    snprintf(total, sizeof total, "%zu", p->total_size);
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddItemToObject(meta, "total_size", cJSON_CreateRaw(total));
    cJSON *wm = cJSON_AddObjectToObject(root, "weight_map");
    for (int i = 0; i < n; i++) {
        mt_st_shard_name(stem, p->shard_of[sorted[i] - es], p->n_shards, file, sizeof file);
        cJSON_AddStringToObject(wm, sorted[i]->name, file);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    free(sorted);
    if (!text) return NULL;
    size_t len = strlen(text);
    char *out = malloc(len + 2);
    if (out) {
        memcpy(out, text, len);
        out[len] = '\n';
        out[len + 1] = 0;
    }
    cJSON_free(text);
    return out;
}

// The entries of shard k, in their original order (pointers into a scratch array).
static int shard_entries(const mt_st_entry *es, int n, const mt_st_shard_plan *p, int k, mt_st_entry *out, int *idx) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if (p->shard_of[i] == k) {
            out[m] = es[i];
            idx[m++] = i;
        }
    return m;
}

void mt_st_shard_plan_free(mt_st_shard_plan *p) {
    if (!p) return;
    free(p->shard_of);
    free(p->file_bytes);
    memset(p, 0, sizeof *p);
}

mt_status mt_st_shard_plan_make(const mt_st_entry *es, int n, size_t max_bytes, const char *stem,
                                mt_st_shard_plan *p) {
    memset(p, 0, sizeof *p);
    if (n < 0 || (n > 0 && !es) || max_bytes == 0) return mt_fail(MT_ERR_ARG, "shard plan: bad argument");
    p->shard_of = malloc((size_t)(n ? n : 1) * sizeof *p->shard_of);
    p->file_bytes = calloc((size_t)(n ? n : 1), sizeof *p->file_bytes);
    mt_st_entry *sub = malloc((size_t)(n ? n : 1) * sizeof *sub);
    int *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    mt_status s =
        p->shard_of && p->file_bytes && sub && idx ? MT_OK : mt_fail(MT_ERR_MEMORY, "shard plan: out of memory");
    size_t in_shard = 0;
    int k = 0;
    for (int i = 0; i < n && s == MT_OK; i++) {
        size_t b = entry_bytes(&es[i]);
        if (in_shard > 0 && in_shard + b > max_bytes) k++, in_shard = 0;
        p->shard_of[i] = k;
        in_shard += b;
        p->total_size += b;
    }
    p->n_shards = n > 0 ? k + 1 : 1;
    for (int j = 0; j < p->n_shards && s == MT_OK; j++) {
        int m = shard_entries(es, n, p, j, sub, idx);
        s = mt_st_file_bytes(sub, m, &p->file_bytes[j]);
    }
    if (s == MT_OK && p->n_shards > 1) {
        char *text = index_text(stem, es, n, p);
        if (!text) s = mt_fail(MT_ERR_MEMORY, "%s.safetensors.index.json: out of memory", stem);
        else p->index_bytes = strlen(text);
        free(text);
    }
    free(sub);
    free(idx);
    if (s != MT_OK) mt_st_shard_plan_free(p);
    return s;
}

mt_status mt_st_write_shard(const char *dir, const char *stem, const mt_st_entry *es, int n,
                            const mt_st_shard_plan *p, int k, uint32_t *crcs) {
    mt_st_entry *sub = malloc((size_t)(n ? n : 1) * sizeof *sub);
    int *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    uint32_t *sub_crc = malloc((size_t)(n ? n : 1) * sizeof *sub_crc);
    mt_status s = sub && idx && sub_crc ? MT_OK : mt_fail(MT_ERR_MEMORY, "%s: out of memory", dir);
    char name[300], path[4400];
    if (s == MT_OK) {
        int m = shard_entries(es, n, p, k, sub, idx);
        mt_st_shard_name(stem, k, p->n_shards, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        s = mt_st_write_sums(path, sub, m, sub_crc);
        for (int j = 0; j < m && s == MT_OK && crcs; j++) crcs[idx[j]] = sub_crc[j];
    }
    free(sub);
    free(idx);
    free(sub_crc);
    return s;
}

mt_status mt_st_write_index(const char *dir, const char *stem, const mt_st_entry *es, int n,
                            const mt_st_shard_plan *p) {
    if (p->n_shards <= 1) return MT_OK;
    char path[4400];
    char *text = index_text(stem, es, n, p);
    snprintf(path, sizeof path, "%s/%s.safetensors.index.json", dir, stem);
    mt_status s =
        text ? mt_file_write_atomic(path, text, strlen(text)) : mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    free(text);
    return s;
}

mt_status mt_st_write_sharded(const char *dir, const char *stem, const mt_st_entry *es, int n,
                              const mt_st_shard_plan *p, uint32_t *crcs) {
    mt_status s = MT_OK;
    for (int k = 0; k < p->n_shards && s == MT_OK; k++) s = mt_st_write_shard(dir, stem, es, n, p, k, crcs);
    return s == MT_OK ? mt_st_write_index(dir, stem, es, n, p) : s;
}

mt_status mt_st_open_stem(const char *dir, const char *stem, mt_safetensors **out) {
    char single[4400], index[4400];
    struct stat sb;
    snprintf(single, sizeof single, "%s/%s.safetensors", dir, stem);
    snprintf(index, sizeof index, "%s/%s.safetensors.index.json", dir, stem);
    if (stat(single, &sb) != 0 && stat(index, &sb) == 0) return mt_st_open(index, out);
    return mt_st_open(single, out); // absent too: the error names the single file
}
