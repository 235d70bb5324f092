// test_util.c: helpers shared by the C tests.
#define _POSIX_C_SOURCE 200809L // mkdtemp under -std=c11

#include "test_util.h"

#include "engine/host_state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char scratch[512]; // mt_test_tmpdir_make's directory

int mt_test_failures = 0, mt_test_checks = 0;

double mt_test_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    if (den == 0) return num;
    return num / den;
}

double mt_test_max_rel(const float *a, const float *b, size_t n, double floor) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + floor);
        if (r > worst || isnan(r)) worst = isnan(r) ? INFINITY : r;
    }
    return worst;
}

void mt_test_fill_uniform(float *x, size_t n, unsigned long long seed, float lo, float hi) {
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

int mt_test_finish(const char *name) {
    int failed = mt_test_failures;
    int passed = mt_test_checks - failed;
    if (mt_test_checks == 0) {
        fprintf(stderr, "%s: no checks ran\n", name);
        return 1;
    }
    fprintf(stderr, "%s: %d passed, %d failed\n", name, passed, failed);
    if (scratch[0]) mt_test_rmtree(scratch);
    return failed ? 1 : 0;
}

int mt_test_mkdtemp(char *dir, size_t cap, const char *prefix) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, cap, "%s/%s_XXXXXX", base && base[0] ? base : "/tmp", prefix);
    if (mkdtemp(dir)) return 1;
    perror(dir);
    return 0;
}

void mt_test_rmtree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

const char *mt_test_tmpdir_make(const char *prefix) {
    if (!mt_test_mkdtemp(scratch, sizeof scratch, prefix)) exit(1);
    return scratch;
}

const char *mt_test_tmpdir(void) { return scratch; }

const char *mt_test_path(const char *name) {
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", scratch, name);
    return p;
}

const char *mt_test_write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    return path;
}

const char *mt_test_write_text(const char *path, const char *text) {
    return mt_test_write_bytes(path, text, strlen(text));
}

const char *mt_test_write_tmp(const char *name, const char *text) {
    return mt_test_write_text(mt_test_path(name), text);
}

char *mt_test_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

unsigned char *mt_test_state_snapshot(const mt_model *m, size_t *bytes) {
    size_t ws = mt_dtype_size(m->wdt), total = 0;
    for (int i = 0; i < m->n_units; i++) total += m->units[i].lay->numel * (ws + 8 + (m->units[i].master ? 4 : 0));
    unsigned char *s = malloc(total ? total : 1), *p = s;
    if (!s) {
        fprintf(stderr, "mt_test_state_snapshot: out of memory (%zu bytes)\n", total);
        exit(1);
    }
    for (int i = 0; i < m->n_units; i++) {
        const mt_unit *u = &m->units[i];
        size_t n = u->lay->numel;
        memcpy(p, u->param, n * ws), p += n * ws;
        memcpy(p, u->m, n * 4), p += n * 4;
        memcpy(p, u->v, n * 4), p += n * 4;
        if (u->master) memcpy(p, u->master, n * 4), p += n * 4;
    }
    *bytes = total;
    return s;
}

static void (*real_adamw)(const mt_host_work *, const mt_model *, mt_unit *, const mt_adamw_state *,
                          const mt_adamw_hparams *, float);
static int spec_passes, spec_passes_at_step; // out-of-place AdamW passes: in all, and before this step

static void counting_adamw(const mt_host_work *h, const mt_model *m, mt_unit *u, const mt_adamw_state *out,
                           const mt_adamw_hparams *hp, float weight_decay) {
    real_adamw(h, m, u, out, hp, weight_decay);
    if (out) __atomic_add_fetch(&spec_passes, 1, __ATOMIC_SEQ_CST);
}

void mt_test_spec_probe(mt_model *m) {
    if (m->host.adamw != counting_adamw) real_adamw = m->host.adamw; // every model's seam is the same function
    m->host.adamw = counting_adamw;
}

void mt_test_spec_step(void) { spec_passes_at_step = __atomic_load_n(&spec_passes, __ATOMIC_SEQ_CST); }

void mt_test_spec_wait(void) {
    struct timespec nap = {0, 100000};
    for (int i = 0; i < 5000 && __atomic_load_n(&spec_passes, __ATOMIC_SEQ_CST) == spec_passes_at_step; i++)
        nanosleep(&nap, NULL);
}
