// model_io.c: HF weights in and out, random init, optimizer moments, grad dumps.
#include "engine/model_io.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/safetensors.h"

#define MAX_TENSORS_PER_UNIT MT_T_COUNT

mt_status mt_make_dir(const char *dir, const char *option) {
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) return mt_fail(MT_ERR_ARG, "%s %s: path too long", option, dir);
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

static void *elem(void *base, mt_dtype t, size_t off) { return (char *)base + off * mt_dtype_size(t); }

// Finds the HF tensor of view t of unit u (name + suffix) in st and checks its shape.
static mt_status find_view(const mt_safetensors *st, const mt_unit *u, int t, const char *suffix,
                           const mt_st_tensor **out) {
    char name[300];
    mt_layout_hf_name(u->lay, (mt_tensor_id)t, u->layer, name, 256);
    strcat(name, suffix);
    *out = mt_st_find(st, name);
    if (!*out) return mt_fail(MT_ERR_SHAPE, "%s: missing tensor %s", mt_st_path(st, 0), name);
    const mt_tensor_slot *v = &u->lay->t[t];
    return mt_st_expect_shape(st, *out, v->ndim, v->shape);
}

mt_status mt_model_load_weights(mt_model *m, const char *path) {
    mt_safetensors *st;
    MT_TRY(mt_st_open(path, &st));
    mt_status s = MT_OK;
    for (int ui = 0; ui < m->n_units && s == MT_OK; ui++) {
        mt_unit *u = &m->units[ui];
        for (int t = 0; t < MT_T_COUNT && s == MT_OK; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            const mt_st_tensor *ti;
            if (!v->present || (s = find_view(st, u, t, "", &ti)) != MT_OK) continue;
            if (u->master) {
                s = mt_st_read(st, ti, u->master + v->offset, MT_F32);
                if (s == MT_OK) mt_convert(elem(u->param, m->wdt, v->offset), m->wdt, u->master + v->offset, MT_F32, v->numel);
            } else {
                s = mt_st_read(st, ti, elem(u->param, m->wdt, v->offset), m->wdt);
            }
        }
    }
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
            n++;
        }
    }
    return n;
}

static mt_status write_picked(const mt_model *m, pick_kind a, pick_kind b, const char *path) {
    int cap = m->n_units * MAX_TENSORS_PER_UNIT * 2;
    mt_st_entry *entries = calloc((size_t)cap, sizeof *entries);
    char(*names)[256] = calloc((size_t)cap, 256);
    if (!entries || !names) {
        free(entries);
        free(names);
        return mt_fail(MT_ERR_MEMORY, "%s: cannot allocate the tensor list", path);
    }
    int n = collect(m, a, entries, names);
    if (b != a) n += collect(m, b, entries + n, names + n);
    mt_status s = mt_st_write(path, entries, n);
    free(entries);
    free(names);
    return s;
}

mt_status mt_model_save(const mt_model *m, const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    mt_config c = m->cfg;
    c.torch_dtype = m->prec == MT_PREC_PAPER ? MT_BF16 : MT_F32;
    MT_TRY(mt_config_save(&c, path));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    MT_TRY(write_picked(m, PICK_WEIGHTS, PICK_WEIGHTS, path));
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    return write_picked(m, PICK_EXP_AVG, PICK_EXP_AVG_SQ, path);
}

mt_status mt_model_load_optimizer(mt_model *m, const char *dir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    mt_safetensors *st;
    MT_TRY(mt_st_open(path, &st));
    mt_status s = MT_OK;
    for (int ui = 0; ui < m->n_units && s == MT_OK; ui++) {
        mt_unit *u = &m->units[ui];
        for (int t = 0; t < MT_T_COUNT && s == MT_OK; t++) {
            const mt_tensor_slot *v = &u->lay->t[t];
            if (!v->present) continue;
            for (int k = 0; k < 2 && s == MT_OK; k++) {
                const mt_st_tensor *ti;
                s = find_view(st, u, t, k == 0 ? ".exp_avg" : ".exp_avg_sq", &ti);
                if (s == MT_OK) s = mt_st_read(st, ti, (k == 0 ? u->m : u->v) + v->offset, MT_F32);
            }
        }
    }
    mt_st_close(st);
    return s;
}

mt_status mt_model_save_grads(const mt_model *m, const char *path) {
    return write_picked(m, PICK_GRADS, PICK_GRADS, path);
}
