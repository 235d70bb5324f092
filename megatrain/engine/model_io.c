// model_io.c: HF weights in and out, random init, optimizer moments, grad dumps,
// and the checks every tensor passes on its way in or out: finite values, and for
// a checkpoint the dtype, shape and CRC-32 recorded when it was saved.
#include "engine/model_io.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/out_file.h"
#include "engine/host_shard.h"
#include "engine/host_shard_save.h"
#include "model/safetensors.h"

#define MAX_TENSORS_PER_UNIT MT_T_COUNT

mt_status mt_make_dir(const char *dir, const char *option) {
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return mt_fail(MT_ERR_ARG, "%s %s: path too long", option, dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return mt_fail(MT_ERR_IO, "%s %s: cannot create directory %s: %s", option, dir, tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return mt_fail(MT_ERR_IO, "%s %s: cannot create directory: %s", option, dir, strerror(errno));
    struct stat sb;
    if (stat(tmp, &sb) != 0 || !S_ISDIR(sb.st_mode)) return mt_fail(MT_ERR_IO, "%s %s: not a directory", option, dir);
    return MT_OK;
}

static mt_status read_checked(const mt_safetensors *st, const mt_st_tensor *ti, void *dst, mt_dtype dt,
                              const mt_tensor_records *expect);

static void *elem(void *base, mt_dtype t, size_t off) { return (char *)base + off * mt_dtype_size(t); }

// Finds the HF tensor of view t of unit u (name + suffix) in st and checks its shape.
static mt_status find_view(const mt_safetensors *st, const mt_unit *u, int t, const char *suffix,
                           const mt_st_tensor **out) {
    char name[300];
    mt_layout_hf_name(u->lay, (mt_tensor_id)t, u->layer, name, 256);
    strcat(name, suffix);
    *out = mt_st_find(st, name);
    if (!*out) return mt_fail(MT_ERR_SHAPE, "%s: missing tensor %s", mt_st_source(st), name);
    const mt_tensor_slot *v = &u->lay->t[t];
    return mt_st_expect_shape(st, *out, v->ndim, v->shape);
}

// ----------------------------------------------------------------------------
// finite values

// Index of the first NaN or infinity among x[0..n) of type t, or n. An all-ones
// exponent marks both; an integer OR-reduction per chunk vectorizes, and the
// chunks run in parallel (a 100B-parameter state is scanned before every save).
#define SCAN_CHUNK ((size_t)1 << 20)
static size_t first_nonfinite(const void *x, mt_dtype t, size_t n) {
    long long chunks = (long long)((n + SCAN_CHUNK - 1) / SCAN_CHUNK), first = chunks;
#pragma omp parallel for schedule(static) reduction(min : first)
    for (long long c = 0; c < chunks; c++) {
        size_t a = (size_t)c * SCAN_CHUNK, b = a + SCAN_CHUNK < n ? a + SCAN_CHUNK : n;
        unsigned bad = 0;
        if (t == MT_F32) {
            const uint32_t *u = x;
            for (size_t i = a; i < b; i++) bad |= (u[i] & 0x7f800000u) == 0x7f800000u;
        } else {
            const uint16_t *h = x;
            for (size_t i = a; i < b; i++) bad |= (h[i] & 0x7f80u) == 0x7f80u;
        }
        if (bad && c < first) first = c;
    }
    if (first == chunks) return n;
    for (size_t i = (size_t)first * SCAN_CHUNK; i < n; i++) {
        float v = mt_load_f32(x, t, i);
        if (!isfinite(v)) return i;
    }
    return n;
}

// "PATH: tensor NAME: nan at element 12 (a non-finite value)" when x holds one.
static mt_status check_finite(const void *x, mt_dtype t, size_t n, const char *file, const char *name,
                              const char *what) {
    size_t i = first_nonfinite(x, t, n);
    if (i == n) return MT_OK;
    float v = mt_load_f32(x, t, i);
    return mt_fail(MT_ERR_FORMAT, "%s%stensor %s%s: %s at element %zu is not finite", file ? file : "",
                   file ? ": " : "", name, what, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf", i);
}

mt_status mt_model_check_finite(const mt_model *m) {
    char name[300];
    for (int ui = 0; ui < m->n_units; ui++) {
        const mt_unit *u = &m->units[ui];
        for (int t = 0; t < MT_T_COUNT; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            if (!v->present) continue;
            mt_layout_hf_name(u->lay, (mt_tensor_id)t, u->layer, name, 256);
            if (u->master)
                MT_TRY(check_finite(u->master + v->offset, MT_F32, v->numel, NULL, name, " (f32 master weights)"));
            MT_TRY(check_finite(elem(u->param, m->wdt, v->offset), m->wdt, v->numel, NULL, name, " (weights)"));
            MT_TRY(check_finite(u->m + v->offset, MT_F32, v->numel, NULL, name, " (Adam exp_avg)"));
            MT_TRY(check_finite(u->v + v->offset, MT_F32, v->numel, NULL, name, " (Adam exp_avg_sq)"));
        }
    }
    return MT_OK;
}

// ----------------------------------------------------------------------------
// checkpoint records

static int cmp_record(const void *a, const void *b) {
    return strcmp(((const mt_tensor_record *)a)->name, ((const mt_tensor_record *)b)->name);
}

void mt_tensor_records_sort(mt_tensor_records *r) {
    if (r->n > 1) qsort(r->t, (size_t)r->n, sizeof *r->t, cmp_record);
}

const mt_tensor_record *mt_tensor_records_find(const mt_tensor_records *r, const char *name) {
    if (!r || r->n == 0 || strlen(name) >= sizeof r->t[0].name) return NULL;
    mt_tensor_record key;
    snprintf(key.name, sizeof key.name, "%s", name);
    return bsearch(&key, r->t, (size_t)r->n, sizeof key, cmp_record);
}

void mt_tensor_records_free(mt_tensor_records *r) {
    if (!r) return;
    free(r->t);
    r->t = NULL;
    r->n = 0;
}

static const char *FOREIGN_HINT = "the file was changed or damaged after the save, or comes from another checkpoint";

// With `expect`: the file holds exactly the recorded tensors.
static mt_status expect_count(const mt_safetensors *st, const mt_tensor_records *expect) {
    if (!expect || mt_st_count(st) == expect->n) return MT_OK;
    return mt_fail(MT_ERR_FORMAT, "%s: holds %d tensors but checkpoint.json records %d: %s", mt_st_source(st),
                   mt_st_count(st), expect->n, FOREIGN_HINT);
}

mt_status mt_model_read_recorded(const mt_safetensors *st, const mt_st_tensor *ti, void *dst, mt_dtype dt,
                                 const mt_tensor_records *expect) {
    return read_checked(st, ti, dst, dt, expect);
}

// Reads tensor ti into dst (type dt) and, with `expect`, checks it against its record.
static mt_status read_checked(const mt_safetensors *st, const mt_st_tensor *ti, void *dst, mt_dtype dt,
                              const mt_tensor_records *expect) {
    const char *file = mt_st_path(st, ti->file);
    const mt_tensor_record *r = NULL;
    if (expect) {
        r = mt_tensor_records_find(expect, ti->name);
        if (!r)
            return mt_fail(MT_ERR_FORMAT, "%s: tensor %s is not recorded in checkpoint.json: %s", file, ti->name,
                           FOREIGN_HINT);
        const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
        if (strcmp(r->file, base))
            return mt_fail(MT_ERR_FORMAT, "%s: tensor %s: checkpoint.json records it in %s: %s", file, ti->name,
                           r->file, FOREIGN_HINT);
        int same = r->dtype == ti->dtype && r->ndim == ti->ndim;
        for (int d = 0; same && d < r->ndim; d++) same = r->shape[d] == ti->shape[d];
        if (!same)
            return mt_fail(MT_ERR_FORMAT, "%s: tensor %s: dtype or shape differs from checkpoint.json: %s", file,
                           ti->name, FOREIGN_HINT);
    }
    uint32_t crc = 0;
    MT_TRY(mt_st_read_sum(st, ti, dst, dt, expect ? &crc : NULL));
    if (r && crc != r->crc32)
        return mt_fail(MT_ERR_FORMAT, "%s: tensor %s: CRC-32 %08x, but checkpoint.json records %08x: %s", file,
                       ti->name, (unsigned)crc, (unsigned)r->crc32, FOREIGN_HINT);
    // The range check of a narrowing read: an f32 value above bf16's largest finite one
    // becomes infinite on the way in. F16 widens exactly (its whole range lies inside
    // bf16's and f32's), so an infinity read from F16 was one in the file: most often a
    // value that overflowed F16's 65504 when the checkpoint was cast to half.
    const char *what = ti->dtype == MT_F16
                           ? " (stored as F16, largest finite 65504: an overflow when it was cast to F16?)"
                       : dt == MT_BF16 && ti->dtype != MT_BF16 ? " (rounded to bf16)"
                                                               : "";
    return check_finite(dst, dt, ti->numel, file, ti->name, what);
}

// ----------------------------------------------------------------------------
// loading

// Why a file would hold a tensor this config does not place, where the name tells.
static const char *unused_why(const mt_config *c, const char *name) {
    if (strstr(name, "self_attn.") && strstr(name, "_proj.bias") && !c->attention_bias)
        return c->arch == MT_ARCH_LLAMA ? "config.json: model_type llama without attention_bias has no q/k/v biases; "
                                          "Qwen2 weights need model_type qwen2"
                                        : "config.json: this model_type has no q/k/v biases";
    if (!strcmp(name, "lm_head.weight") && c->tie_word_embeddings)
        return "config.json sets tie_word_embeddings: true, so the head is model.embed_tokens.weight; weights with "
               "their own lm_head.weight want tie_word_embeddings: false";
    if ((strstr(name, "self_attn.q_norm.") || strstr(name, "self_attn.k_norm.")) && !c->qk_norm)
        return "config.json: this model_type has no q/k norms; Qwen3 weights need model_type qwen3";
    return NULL;
}

// The tensors of st not marked in used[]: an error naming them (and why, where the
// name tells), or with rep->allow_unused a report the caller prints.
static mt_status check_unused(const mt_safetensors *st, const mt_config *c, const unsigned char *used,
                              mt_load_report *rep) {
    int n = 0, listed = 0;
    char list[800] = "";
    const char *why = NULL;
    size_t k = 0;
    for (int i = 0; i < mt_st_count(st); i++) {
        const char *name = mt_st_get(st, i)->name;
        // RoPE's inverse frequencies, a buffer older HF Llama saves kept: derived from
        // config.json, and skipped by transformers' own loader (_keys_to_ignore_on_load_unexpected).
        if (used[i] || strstr(name, ".rotary_emb.inv_freq")) continue;
        if (!why) why = unused_why(c, name);
        if (listed < 4 && k < sizeof list) {
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", listed ? ", " : "", name);
            listed++;
        }
        n++;
    }
    if (n == 0) return MT_OK;
    char msg[sizeof rep->unused], more[40] = "";
    if (n > listed) snprintf(more, sizeof more, ", and %d more", n - listed);
    snprintf(msg, sizeof msg, "%s: %d tensor%s the model does not use: %s%s%s%s%s", mt_st_source(st), n,
             n == 1 ? "" : "s", list, more, why ? " (" : "", why ? why : "", why ? ")" : "");
    if (!rep || !rep->allow_unused)
        return mt_fail(MT_ERR_SHAPE, "%s. HINT: fix config.json, or give --allow-unused-tensors to train without them",
                       msg);
    rep->n_unused = n;
    snprintf(rep->unused, sizeof rep->unused, "%s", msg);
    return MT_OK;
}

mt_status mt_model_load_weights(mt_model *m, const char *path, const mt_tensor_records *expect, mt_load_report *rep) {
    mt_safetensors *st;
    MT_TRY(mt_st_open(path, &st));
    if (rep) rep->n_unused = 0, rep->unused[0] = 0;
    unsigned char *used = calloc((size_t)mt_st_count(st) + 1, 1);
    mt_status s = used ? expect_count(st, expect) : mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    for (int ui = 0; ui < m->n_units && s == MT_OK; ui++) {
        mt_unit *u = &m->units[ui];
        for (int t = 0; t < MT_T_COUNT && s == MT_OK; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            const mt_st_tensor *ti;
            if (!v->present || (s = find_view(st, u, t, "", &ti)) != MT_OK) continue;
            used[ti - mt_st_get(st, 0)] = 1;
            void *param = elem(u->param, m->wdt, v->offset);
            if (u->master) {
                s = read_checked(st, ti, u->master + v->offset, MT_F32, expect);
                if (s == MT_OK) mt_convert(param, m->wdt, u->master + v->offset, MT_F32, v->numel);
                if (m->shards) mt_host_shard_drop(m->shards, u->master + v->offset, v->numel); // another host's
            } else {
                s = read_checked(st, ti, param, m->wdt, expect);
            }
            if (s == MT_OK && u->master) // the streamed bf16 copy of the f32 master
                s = check_finite(param, m->wdt, v->numel, mt_st_path(st, ti->file), ti->name, " (rounded to bf16)");
        }
    }
    if (s == MT_OK) s = check_unused(st, &m->cfg, used, rep);
    free(used);
    mt_st_close(st);
    return s;
}

// splitmix64 + Box-Muller: reproducible normals without a library dependency.
static unsigned long long splitmix(unsigned long long *s) {
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uniform01(unsigned long long *s) { return ((splitmix(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

// Each 64K-element chunk of each tensor draws from its own stream, seeded by
// (seed, unit, tensor, chunk): threaded, and the same values for any thread count.
#define INIT_CHUNK 65536

void mt_model_init_random(mt_model *m, unsigned long long seed) {
    for (int ui = 0; ui < m->n_units; ui++) {
        mt_unit *u = &m->units[ui];
        for (int t = 0; t < MT_T_COUNT; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            if (!v->present) continue;
            int is_bias = t == MT_T_QB || t == MT_T_KB || t == MT_T_VB;
            long long chunks = (long long)((v->numel + INIT_CHUNK - 1) / INIT_CHUNK);
#pragma omp parallel for schedule(static)
            for (long long c = 0; c < chunks; c++) {
                unsigned long long rng = seed ^ ((unsigned long long)ui << 48) ^ ((unsigned long long)t << 40) ^
                                         (unsigned long long)c * 0xD1B54A32D192ED03ull;
                size_t end = (size_t)(c + 1) * INIT_CHUNK < v->numel ? (size_t)(c + 1) * INIT_CHUNK : v->numel;
                for (size_t i = (size_t)c * INIT_CHUNK; i < end; i++) {
                    float x;
                    if (v->ndim == 1) x = is_bias ? 0.0f : 1.0f;
                    else x = (float)(0.02 * sqrt(-2 * log(uniform01(&rng))) * cos(2 * M_PI * uniform01(&rng)));
                    if (u->master) u->master[v->offset + i] = x;
                    mt_store_f32(u->param, m->wdt, v->offset + i, x);
                }
            }
        }
        if (m->slice.H > 1) mt_host_shard_release(u, m->slice.H, m->slice.h); // another host's master: a unit at most
    }
}

// Collects one safetensors entry per present tensor, with `pick` choosing the data.
typedef enum { PICK_WEIGHTS, PICK_EXP_AVG, PICK_EXP_AVG_SQ, PICK_GRADS } pick_kind;

static int collect(const mt_model *m, pick_kind pick, mt_st_entry *out, char (*names)[256]) {
    int n = 0;
    for (int ui = 0; ui < m->n_units; ui++) {
        const mt_unit *u = &m->units[ui];
        for (int t = 0; t < MT_T_COUNT; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            if (!v->present) continue;
            mt_layout_hf_name(u->lay, (mt_tensor_id)t, u->layer, names[n], 256);
            mt_st_entry *e = &out[n];
            memset(e, 0, sizeof *e);
            e->ndim = v->ndim;
            e->shape[0] = v->shape[0];
            e->shape[1] = v->shape[1];
            switch (pick) {
            case PICK_WEIGHTS:
                if (u->master) e->dtype = MT_F32, e->data = u->master + v->offset;
                else e->dtype = m->wdt, e->data = elem(u->param, m->wdt, v->offset);
                e->file_dtype = e->dtype;
                break;
            case PICK_EXP_AVG:
            case PICK_EXP_AVG_SQ:
                strncat(names[n], pick == PICK_EXP_AVG ? ".exp_avg" : ".exp_avg_sq", 255 - strlen(names[n]));
                e->dtype = e->file_dtype = MT_F32;
                e->data = (pick == PICK_EXP_AVG ? u->m : u->v) + v->offset;
                break;
            case PICK_GRADS:
                e->dtype = m->wdt;
                e->file_dtype = MT_F32;
                e->data = elem(u->grad, m->wdt, v->offset);
                break;
            }
            e->name = names[n];
            if (m->shards) e->fetch = mt_host_shard_fetch, e->drop = mt_host_shard_drop, e->ctx = m->shards;
            n++;
        }
    }
    return n;
}

// The entries of picks a and b (a == b: one), with their names; the caller frees both.
static mt_status picked(const mt_model *m, pick_kind a, pick_kind b, const char *what, mt_st_entry **entries,
                        char (**names)[256], int *n) {
    int cap = m->n_units * MAX_TENSORS_PER_UNIT * 2;
    *entries = calloc((size_t)cap, sizeof **entries);
    *names = calloc((size_t)cap, 256);
    if (!*entries || !*names) {
        free(*entries);
        free(*names);
        return mt_fail(MT_ERR_MEMORY, "%s: cannot allocate the tensor list", what);
    }
    *n = collect(m, a, *entries, *names);
    if (b != a) *n += collect(m, b, *entries + *n, *names + *n);
    return MT_OK;
}

mt_status mt_model_weight_entries(const mt_model *m, mt_st_entry **entries, char (**names)[256], int *n) {
    return picked(m, PICK_WEIGHTS, PICK_WEIGHTS, "the weights", entries, names, n);
}

// Writes picks a (and b) as DIR/STEM.safetensors, or as shards of at most
// shard_bytes of tensor data with STEM.safetensors.index.json; `rec` (may be NULL)
// receives every tensor's record, its file included.
static mt_status write_picked(const mt_model *m, pick_kind a, pick_kind b, const char *dir, const char *stem,
                              size_t shard_bytes, mt_tensor_records *rec) {
    mt_st_entry *entries;
    char(*names)[256];
    int n = 0;
    MT_TRY(picked(m, a, b, dir, &entries, &names, &n));
    mt_st_shard_plan plan = {0};
    uint32_t *crcs = calloc((size_t)(n ? n : 1), sizeof *crcs);
    mt_status s = crcs ? mt_st_shard_plan_make(entries, n, shard_bytes, stem, &plan)
                       : mt_fail(MT_ERR_MEMORY, "%s: out of memory", dir);
    if (s == MT_OK) s = mt_st_write_sharded(dir, stem, entries, n, &plan, crcs);
    if (s == MT_OK && rec) {
        rec->n = 0;
        rec->t = calloc((size_t)(n ? n : 1), sizeof *rec->t);
        if (!rec->t) s = mt_fail(MT_ERR_MEMORY, "%s: out of memory for the tensor records", dir);
        for (int i = 0; i < n && s == MT_OK; i++) {
            mt_tensor_record *r = &rec->t[rec->n++];
            snprintf(r->name, sizeof r->name, "%s", entries[i].name);
            mt_st_shard_name(stem, plan.shard_of[i], plan.n_shards, r->file, sizeof r->file);
            r->dtype = entries[i].file_dtype;
            r->ndim = entries[i].ndim;
            r->shape[0] = entries[i].shape[0];
            r->shape[1] = entries[i].shape[1];
            r->crc32 = crcs[i];
        }
        mt_tensor_records_sort(rec);
    }
    mt_st_shard_plan_free(&plan);
    free(crcs);
    free(entries);
    free(names);
    return s;
}

// Bytes and files of picks a (and b) saved with this shard size.
static mt_status picked_bytes(const mt_model *m, pick_kind a, pick_kind b, const char *stem, size_t shard_bytes,
                              size_t *bytes, int *files) {
    mt_st_entry *entries;
    char(*names)[256];
    int n = 0;
    MT_TRY(picked(m, a, b, stem, &entries, &names, &n));
    mt_st_shard_plan plan;
    mt_status s = mt_st_shard_plan_make(entries, n, shard_bytes, stem, &plan);
    if (s == MT_OK) {
        *bytes = plan.index_bytes;
        for (int k = 0; k < plan.n_shards; k++) *bytes += plan.file_bytes[k];
        *files = plan.n_shards + (plan.n_shards > 1);
        mt_st_shard_plan_free(&plan);
    }
    free(entries);
    free(names);
    return s;
}

mt_status mt_model_save_bytes(const mt_model *m, size_t shard_bytes, mt_save_bytes *out) {
    memset(out, 0, sizeof *out);
    MT_TRY(picked_bytes(m, PICK_WEIGHTS, PICK_WEIGHTS, "model", shard_bytes, &out->weights_bytes, &out->weight_files));
    return picked_bytes(m, PICK_EXP_AVG, PICK_EXP_AVG_SQ, "optimizer", shard_bytes, &out->optimizer_bytes,
                        &out->optimizer_files);
}

mt_status mt_model_save(const mt_model *m, const char *dir, size_t shard_bytes, mt_tensor_records *weights,
                        mt_tensor_records *moments) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    mt_config c = m->cfg;
    c.torch_dtype = m->prec == MT_PREC_PAPER ? MT_BF16 : MT_F32;
    MT_TRY(mt_config_save(&c, path));
    if (m->shards && m->shards->per_host) // every host writes its part (engine/host_shard_save.h)
        return mt_host_shard_save(m->shards, dir, shard_bytes, weights, moments);
    MT_TRY(write_picked(m, PICK_WEIGHTS, PICK_WEIGHTS, dir, "model", shard_bytes, weights));
    return write_picked(m, PICK_EXP_AVG, PICK_EXP_AVG_SQ, dir, "optimizer", shard_bytes, moments);
}

mt_status mt_model_load_optimizer(mt_model *m, const char *dir, const mt_tensor_records *expect) {
    int per_host = 0;
    MT_TRY(mt_host_shard_saved_per_host(dir, &per_host));
    if (per_host) return mt_host_shard_load_optimizer(m, dir, expect); // saved by several hosts, each its slices
    mt_safetensors *st;
    MT_TRY(mt_st_open_stem(dir, "optimizer", &st));
    mt_status s = expect_count(st, expect);
    for (int ui = 0; ui < m->n_units && s == MT_OK; ui++) {
        mt_unit *u = &m->units[ui];
        for (int t = 0; t < MT_T_COUNT && s == MT_OK; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            if (!v->present) continue;
            for (int k = 0; k < 2 && s == MT_OK; k++) {
                const mt_st_tensor *ti;
                float *dst = (k == 0 ? u->m : u->v) + v->offset;
                s = find_view(st, u, t, k == 0 ? ".exp_avg" : ".exp_avg_sq", &ti);
                if (s == MT_OK) s = read_checked(st, ti, dst, MT_F32, expect);
                for (size_t i = 0; k == 1 && s == MT_OK && i < v->numel; i++)
                    if (dst[i] < 0) // Adam divides by its square root
                        s = mt_fail(MT_ERR_FORMAT, "%s: tensor %s: %g at element %zu: exp_avg_sq cannot be negative",
                                    mt_st_path(st, ti->file), ti->name, dst[i], i);
                if (s == MT_OK && m->shards) mt_host_shard_drop(m->shards, dst, v->numel); // another host's slices
            }
        }
    }
    mt_st_close(st);
    return s;
}

mt_status mt_model_save_grads(const mt_model *m, const char *path) {
    mt_st_entry *entries;
    char(*names)[256];
    int n = 0;
    char dest[MT_OUT_PATH_MAX];
    int in_place;
    // A safetensors file is read whole: a regular file only; through a symlink, the file it names.
    MT_TRY(mt_out_resolve("--dump-grads", path, MT_OUT_FILE, dest, sizeof dest, &in_place));
    MT_TRY(picked(m, PICK_GRADS, PICK_GRADS, path, &entries, &names, &n));
    mt_status s = mt_st_write(dest, entries, n);
    free(entries);
    free(names);
    if (s != MT_OK && strncmp(mt_last_error(), "--dump-grads", 12)) { // the write's error names the file only
        char why[1024];
        snprintf(why, sizeof why, "%s", mt_last_error());
        s = mt_fail(s, "--dump-grads %s: %s", path, why);
    }
    return s;
}
