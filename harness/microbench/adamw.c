// adamw.c: the host AdamW (mt_adamw_update) per precision mode, n parameters.
//   adamw/<mode>/<n>   counters params_per_s and bytes_per_second.
// Bytes per parameter counted (reads + writes, no write-allocate):
//   fp32 : read p4 g4 m4 v4, write p4 m4 v4                  = 16 + 12 = 28
//   paper: read p2 g2 m4 v4 (bf16 p, g), write p2 m4 v4      = 12 + 10 = 22
//   mixed: read master4 g2 m4 v4, write master4 m4 v4 p2(bf16) = 14 + 14 = 28
// bytes_per_second = bytes_per_param * params_per_s (counted without write-allocate: mixed's
// bf16 p is written, not read, so the hardware moves 2 B more there unless stores stream).
// After the timed steps one more step is checked, bitwise, against mt_adamw_update_ref on
// sampled elements (counter "wrong"; an error if any differs). The label names the vector path
// (mt_adamw_isa(): avx512, avx2, sve, neon, scalar; MT_SIMD=neon picks a lower one) and
// the thread count; the JSON context carries the path too ("mt_adamw_isa").
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mb.h"
#include "optim/adamw.h"

#define CHECK_N 4096 // elements the result check samples, spread over the whole tensor

typedef struct {
    const char *name;
    mt_dtype pdt, gdt;
    int master;
    double bytes_per_param;
} adamw_mode;

static const adamw_mode modes[] = {
    {"adamw/fp32", MT_F32, MT_F32, 0, 28.0},
    {"adamw/paper", MT_BF16, MT_BF16, 0, 22.0},
    {"adamw/mixed", MT_BF16, MT_BF16, 1, 28.0},
};

// One more step on the whole tensor, and on copies of CHECK_N sampled elements through the
// scalar reference: the elements that differ bitwise (-1: no memory for the copies).
static long check_step(const adamw_mode *md, float *master, void *p, const void *g, float *m, float *v, size_t n,
                       mt_adamw_hparams *h) {
    size_t k = n < CHECK_N ? n : CHECK_N, ps = mt_dtype_size(md->pdt), gs = mt_dtype_size(md->gdt);
    float *cm = malloc(k * 4), *cv = malloc(k * 4), *cmaster = md->master ? malloc(k * 4) : NULL;
    char *cp = malloc(k * ps), *cg = malloc(k * gs);
    long wrong = -1;
    if (!cm || !cv || !cp || !cg || (md->master && !cmaster)) goto out;
    for (size_t j = 0; j < k; j++) { // element i = j * n / k: first to near the last
        size_t i = (size_t)((unsigned long long)j * n / k);
        cm[j] = m[i], cv[j] = v[i];
        memcpy(cp + j * ps, (char *)p + i * ps, ps), memcpy(cg + j * gs, (const char *)g + i * gs, gs);
        if (cmaster) cmaster[j] = master[i];
    }
    h->step++;
    mt_adamw_update(master, p, md->pdt, g, md->gdt, m, v, n, h, 0.1f);
    mt_adamw_update_ref(cmaster, cp, md->pdt, cg, md->gdt, cm, cv, k, h, 0.1f);
    wrong = 0;
    for (size_t j = 0; j < k; j++) {
        size_t i = (size_t)((unsigned long long)j * n / k);
        wrong += memcmp(cp + j * ps, (char *)p + i * ps, ps) || memcmp(&cm[j], &m[i], 4) || memcmp(&cv[j], &v[i], 4) ||
                 (cmaster && memcmp(&cmaster[j], &master[i], 4));
    }
out:
    free(cm), free(cv), free(cmaster), free(cp), free(cg);
    return wrong;
}

static void bm_adamw(mt_mb_state *s, const int64_t *args, const void *user) {
    const adamw_mode *md = user;
    size_t n = (size_t)args[0];
    float *master = md->master ? mt_mb_alloc(n * 4) : NULL;
    void *p = mt_mb_alloc(n * mt_dtype_size(md->pdt)), *g = mt_mb_alloc(n * mt_dtype_size(md->gdt));
    float *m = mt_mb_alloc(n * 4), *v = mt_mb_alloc(n * 4);
    if (!p || !g || !m || !v || (md->master && !master)) {
        free(master), free(p), free(g), free(m), free(v);
        mt_mb_error(s, "out of memory");
        return;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; i++) {
        uint32_t h = (uint32_t)i * 2654435761u;
        float x = ((float)(h >> 8) / 16777216.0f - 0.5f) * 0.02f; // ~U(-0.01, 0.01)
        mt_store_f32(p, md->pdt, (size_t)i, x);
        mt_store_f32(g, md->gdt, (size_t)i, x * 0.1f);
        if (master) master[i] = x;
        m[i] = 0, v[i] = 0;
    }
    mt_adamw_hparams h = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 0};
    while (mt_mb_keep_running(s)) {
        h.step++;
        mt_adamw_update(master, p, md->pdt, g, md->gdt, m, v, n, &h, 0.1f);
    }
    double iters = (double)mt_mb_iterations(s);
    long wrong = check_step(md, master, p, g, m, v, n, &h);
    if (wrong < 0) {
        free(master), free(p), free(g), free(m), free(v);
        mt_mb_error(s, "out of memory (result check)");
        return;
    }
    if (wrong) mt_mb_error(s, "adamw: result check failed (differs from mt_adamw_update_ref)");
    mt_mb_counter(s, "wrong", (double)wrong, 0);
    mt_mb_counter(s, "params_per_s", (double)n * iters, MT_MB_RATE);
    mt_mb_set_bytes_processed(s, md->bytes_per_param * (double)n * iters);
    mt_mb_counter(s, "bytes_per_param", md->bytes_per_param, 0);
    char label[64];
    snprintf(label, sizeof label, "%s, %d threads", mt_adamw_isa(), omp_get_max_threads());
    mt_mb_set_label(s, label);
    free(master), free(p), free(g), free(m), free(v);
}

void mt_mb_register_adamw(void) {
    const int64_t n = mt_mb_host_n(); // 2^24 params or more: 4x the last-level cache at 12 B/param
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        mt_mb_register(modes[i].name, bm_adamw, &modes[i], &n, 1, MT_MB_REAL_TIME);
}
