// backend_registry.c: the table of backends compiled into this binary. A backend is
// its folder (backends/NAME/, which defines mt_backend_NAME_entry) plus its row here;
// the CLI (--backend), the planner and the op tests (tests/test_backend_ops.c) read
// only this table. "cuda" is compiled in only with nvcc (MT_HAVE_CUDA); "auto" takes
// the first row with device memory that opens here, else cpu.
#include <stdio.h>
#include <string.h>

#include "backend/backend_registry.h"

// Each row is defined in its backend's folder (backends/NAME/), beside its ops table.
extern const mt_backend_entry mt_backend_cpu_entry, mt_backend_cuda_entry, mt_backend_sim_entry;

static const mt_backend_entry *const table[] = {
    &mt_backend_cpu_entry,
#ifdef MT_HAVE_CUDA
    &mt_backend_cuda_entry,
#endif
    &mt_backend_sim_entry,
};
enum { N_ROWS = (int)(sizeof table / sizeof table[0]) };

int mt_backend_count(void) { return N_ROWS; }

const mt_backend_entry *mt_backend_at(int i) { return i >= 0 && i < N_ROWS ? table[i] : NULL; }

static int available(const mt_backend_entry *e) { return !e->available || e->available() == 1; }

// "auto": the first backend with its own device memory that computes on data and opens here.
static const mt_backend_entry *auto_pick(void) {
    for (int i = 0; i < N_ROWS; i++) {
        unsigned c = table[i]->caps;
        if ((c & MT_CAP_DEVICE_MEMORY) && (c & MT_CAP_TENSOR_DATA) && available(table[i])) return table[i];
    }
    return &mt_backend_cpu_entry;
}

const mt_backend_entry *mt_backend_find(const char *name) {
    if (!name || !strcmp(name, "auto")) return auto_pick();
    for (int i = 0; i < N_ROWS; i++)
        if (!strcmp(table[i]->name, name)) return table[i];
    return NULL;
}

// "auto, cpu, cuda or sim": the names a --backend may take, for messages.
static const char *names_list(void) {
    static char buf[256];
    size_t n = (size_t)snprintf(buf, sizeof buf, "auto");
    for (int i = 0; i < N_ROWS && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i == N_ROWS - 1 ? " or " : ", ", table[i]->name);
    return buf;
}

mt_status mt_backend_check_name(const char *name) {
    if (mt_backend_find(name)) return MT_OK;
#ifndef MT_HAVE_CUDA
    if (!strcmp(name, "cuda"))
        return mt_fail(MT_ERR_UNSUPPORTED,
                       "--backend cuda: this binary was built without CUDA (nvcc was not found at configure time)");
#endif
    return mt_fail(MT_ERR_ARG, "--backend %s: unknown backend (expected %s)", name, names_list());
}

mt_status mt_backend_create_with(const char *name, const mt_backend_args *a, mt_backend **out) {
    *out = NULL;
    mt_backend_args f32 = {MT_F32, NULL, 0};
    if (!a) a = &f32;
    MT_TRY(mt_backend_check_name(name));
    const mt_backend_entry *e = mt_backend_find(name);
    if ((e->caps & MT_CAP_VIRTUAL_TIME) && !a->profile_path) // it prices ops with a machine's figures
        return mt_fail(MT_ERR_UNSUPPORTED,
                       "--backend %s: needs --hardware PROFILE (a name in experiments/hardware/ or a "
                       "path to a megatrain.hardware/1 JSON file)",
                       e->name);
    return e->create(a, out);
}

mt_status mt_backend_create(const char *name, mt_dtype act_dtype, mt_backend **out) {
    mt_backend_args a = {act_dtype, NULL, 0};
    return mt_backend_create_with(name, &a, out);
}

int mt_backend_device_count(const char *name) {
    const mt_backend_entry *e = mt_backend_find(name);
    if (!e) return 0;
    return e->device_count ? e->device_count() : 1;
}

unsigned mt_backend_caps_of(const char *name) {
    const mt_backend_entry *e = mt_backend_find(name);
    return e ? e->caps : 0;
}

int mt_backend_list(const char **names, int max) {
    for (int i = 0; i < N_ROWS && i < max; i++) names[i] = table[i]->name;
    return N_ROWS;
}

int mt_attention_list(const char **names, int max) {
    static const char *const compiled[] = {
        "native",
#ifdef MT_HAVE_CUDNN
        "cudnn",
#endif
    };
    int n = (int)(sizeof compiled / sizeof compiled[0]);
    for (int i = 0; i < n && i < max; i++) names[i] = compiled[i];
    return n;
}
