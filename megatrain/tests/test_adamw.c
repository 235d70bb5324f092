// test_adamw.c: the host AdamW. (1) every SIMD path and the threaded split are
// bitwise equal to mt_adamw_update_ref in every precision mode; (2) the reference
// replays a torch.optim.AdamW trajectory (fixtures/adamw_torch.json); (3) speed
// against a STREAM triad on a 64M-element buffer (printed, never asserted).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <omp.h>

#include "optim/adamw.h"
#include "optim/adamw_isa.h"
#include "optim/grad_ops.h"
#include "test_util.h"

static const char *isa_name(mt_adamw_isa_id isa) {
    return isa == MT_ADAMW_AVX512 ? "avx512" : isa == MT_ADAMW_AVX2 ? "avx2" : "scalar";
}

typedef struct {
    mt_dtype pdt, gdt;
    int master;
    const char *name;
} mode;

static const mode MODES[] = {
    {MT_F32, MT_F32, 0, "fp32"},           {MT_BF16, MT_BF16, 0, "paper"},     {MT_BF16, MT_BF16, 1, "mixed"},
    {MT_F32, MT_BF16, 0, "p f32 / g bf16"}, {MT_BF16, MT_F32, 0, "p bf16 / g f32"}, {MT_BF16, MT_F32, 1, "master / g f32"},
};

// One optimizer state in a given mode (all buffers malloc'ed, n may be 0).
typedef struct {
    float *master, *m, *v;
    void *p;
} state;

static void state_init(state *s, const mode *md, size_t n, unsigned long long seed) {
    size_t cnt = n ? n : 1;
    float *tmp = malloc(cnt * sizeof(float));
    s->master = md->master ? malloc(cnt * sizeof(float)) : NULL;
    s->p = malloc(cnt * mt_dtype_size(md->pdt));
    s->m = calloc(cnt, sizeof(float));
    s->v = calloc(cnt, sizeof(float));
    mt_test_fill_uniform(tmp, n, seed, -2.0f, 2.0f);
    if (s->master) memcpy(s->master, tmp, n * sizeof(float));
    mt_convert(s->p, md->pdt, tmp, MT_F32, n);
    free(tmp);
}

static void state_copy(state *d, const state *s, const mode *md, size_t n) {
    if (s->master) memcpy(d->master, s->master, n * sizeof(float));
    memcpy(d->p, s->p, n * mt_dtype_size(md->pdt));
    memcpy(d->m, s->m, n * sizeof(float));
    memcpy(d->v, s->v, n * sizeof(float));
}

static void state_free(state *s) {
    free(s->master);
    free(s->p);
    free(s->m);
    free(s->v);
}

static int state_equal(const state *a, const state *b, const mode *md, size_t n) {
    if (a->master && memcmp(a->master, b->master, n * sizeof(float))) return 0;
    return !memcmp(a->p, b->p, n * mt_dtype_size(md->pdt)) && !memcmp(a->m, b->m, n * sizeof(float)) &&
           !memcmp(a->v, b->v, n * sizeof(float));
}

// Gradients for one step, with a few extremes (overflowing squares, denormal squares, zeros).
static void make_grad(void *g, mt_dtype gdt, size_t n, unsigned long long seed) {
    float *tmp = malloc((n ? n : 1) * sizeof(float));
    mt_test_fill_uniform(tmp, n, seed, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i += 97) tmp[i] = 0.0f;
    for (size_t i = 13; i < n; i += 211) tmp[i] = 3e20f;
    for (size_t i = 29; i < n; i += 223) tmp[i] = -1e-25f;
    mt_convert(g, gdt, tmp, MT_F32, n);
    free(tmp);
}

// Fast path (forced ISA) vs reference: same start, several steps, compare all state bitwise.
static void check_bitwise(mt_adamw_isa_id isa, const mode *md, size_t n, float wd, float beta1) {
    state a, b;
    state_init(&a, md, n, 1000 + n);
    state_init(&b, md, n, 1000 + n);
    state_copy(&b, &a, md, n);
    void *g = malloc((n ? n : 1) * mt_dtype_size(md->gdt));
    int ok = 1;
    for (int step = 1; step <= 3 && ok; step++) {
        mt_adamw_hparams h = {.lr = 1e-2f, .beta1 = beta1, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.37f, .step = step};
        make_grad(g, md->gdt, n, 7 * step + n);
        mt_adamw_update_isa(isa, a.master, a.p, md->pdt, g, md->gdt, a.m, a.v, n, &h, wd);
        mt_adamw_update_ref(b.master, b.p, md->pdt, g, md->gdt, b.m, b.v, n, &h, wd);
        ok = state_equal(&a, &b, md, n);
        CHECK(ok, "%s path != reference: mode %s, n=%zu, wd=%g, beta1=%g, step %d", isa_name(isa), md->name, n,
              (double)wd, (double)beta1, step);
    }
    free(g);
    state_free(&a);
    state_free(&b);
}

static void test_bitwise(void) {
    static const size_t NS[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 1000, 4099, 100003};
    static const float WDS[] = {0.0f, 0.1f};
    mt_adamw_isa_id best = mt_adamw_best_isa();
    for (int isa = MT_ADAMW_SCALAR; isa <= (int)best; isa++)
        for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++)
            for (size_t ni = 0; ni < sizeof NS / sizeof NS[0]; ni++)
                for (int wi = 0; wi < 2; wi++) check_bitwise((mt_adamw_isa_id)isa, &MODES[mi], NS[ni], WDS[wi], 0.9f);
    // beta1 < 0.5 takes torch's other lerp branch.
    for (int isa = MT_ADAMW_SCALAR; isa <= (int)best; isa++) check_bitwise((mt_adamw_isa_id)isa, &MODES[0], 1000, 0.1f, 0.3f);
    fprintf(stderr, "test_adamw: bitwise fast == ref on paths scalar..%s (dispatch picks %s)\n", isa_name(best),
            mt_adamw_isa());
}

// The public entry with 1 and with 2 threads: identical bits.
static void test_threads(void) {
    const mode *md = &MODES[2];
    size_t n = 300001;
    state a, b;
    state_init(&a, md, n, 5);
    state_init(&b, md, n, 5);
    void *g = malloc(n * mt_dtype_size(md->gdt));
    make_grad(g, md->gdt, n, 6);
    mt_adamw_hparams h = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 1};
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    mt_adamw_update(a.master, a.p, md->pdt, g, md->gdt, a.m, a.v, n, &h, 0.1f);
    omp_set_num_threads(2);
    mt_adamw_update(b.master, b.p, md->pdt, g, md->gdt, b.m, b.v, n, &h, 0.1f);
    omp_set_num_threads(saved);
    CHECK(state_equal(&a, &b, md, n), "1 thread and 2 threads differ");
    free(g);
    state_free(&a);
    state_free(&b);
}

// ---- torch fixture ----

// Copies a JSON array of numbers into x; returns its length (or -1 if not an array of numbers).
static int json_floats(const cJSON *a, float *x, int cap) {
    if (!cJSON_IsArray(a)) return -1;
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || n >= cap) return -1;
        x[n++] = (float)e->valuedouble;
    }
    return n;
}

#define FIX_MAX 64

typedef struct {
    char name[8];
    int n;
    float wd;
    float init[FIX_MAX];
    float grads[8][FIX_MAX];
} fix_tensor;

static void replay_run(const cJSON *run, fix_tensor *ts, int nt, const cJSON *hp, int steps, int expect_bitwise) {
    float max_norm = (float)cJSON_GetObjectItem(run, "max_norm")->valuedouble;
    float coef[8] = {0}, tnorm[8] = {0};
    if (max_norm > 0) {
        CHECK(json_floats(cJSON_GetObjectItem(run, "coef"), coef, 8) == steps, "fixture: bad coef");
        CHECK(json_floats(cJSON_GetObjectItem(run, "total_norm"), tnorm, 8) == steps, "fixture: bad total_norm");
    }
    mt_adamw_hparams h = {.lr = (float)cJSON_GetObjectItem(hp, "lr")->valuedouble,
                          .beta1 = (float)cJSON_GetObjectItem(hp, "beta1")->valuedouble,
                          .beta2 = (float)cJSON_GetObjectItem(hp, "beta2")->valuedouble,
                          .eps = (float)cJSON_GetObjectItem(hp, "eps")->valuedouble};
    float p[2][FIX_MAX], m[2][FIX_MAX] = {{0}}, v[2][FIX_MAX] = {{0}}, want[FIX_MAX];
    float pf[2][FIX_MAX], mf[2][FIX_MAX] = {{0}}, vf[2][FIX_MAX] = {{0}}; // fast path alongside
    for (int t = 0; t < nt; t++) {
        memcpy(p[t], ts[t].init, sizeof p[t]);
        memcpy(pf[t], ts[t].init, sizeof pf[t]);
    }
    double worst = 0;
    int exact = 0, total = 0;
    for (int s = 0; s < steps; s++) {
        h.step = s + 1;
        h.grad_scale = max_norm > 0 ? coef[s] : 1.0f;
        if (max_norm > 0) {
            // The engine's norm (double, fixed blocks) against torch's f32 norm.
            double ss = 0;
            for (int t = 0; t < nt; t++) ss += mt_grad_sumsq(ts[t].grads[s], MT_F32, (size_t)ts[t].n);
            CHECK(fabs(sqrt(ss) - tnorm[s]) <= 1e-6 * tnorm[s], "grad norm %.9g vs torch %.9g", sqrt(ss), (double)tnorm[s]);
        }
        for (int t = 0; t < nt; t++) {
            size_t n = (size_t)ts[t].n;
            mt_adamw_update_ref(NULL, p[t], MT_F32, ts[t].grads[s], MT_F32, m[t], v[t], n, &h, ts[t].wd);
            mt_adamw_update(NULL, pf[t], MT_F32, ts[t].grads[s], MT_F32, mf[t], vf[t], n, &h, ts[t].wd);
            CHECK(!memcmp(p[t], pf[t], n * 4), "fixture: fast path != ref, tensor %s step %d", ts[t].name, s + 1);
            const cJSON *traj = cJSON_GetObjectItem(run, ts[t].name);
            CHECK(json_floats(cJSON_GetArrayItem(traj, s), want, FIX_MAX) == ts[t].n, "fixture: bad %s step %d",
                  ts[t].name, s + 1);
            double r = mt_test_max_rel(p[t], want, n, 1e-12);
            if (r > worst) worst = r;
            for (size_t i = 0; i < n; i++) exact += p[t][i] == want[i];
            total += (int)n;
            CHECK(r <= 1e-6, "vs torch: tensor %s step %d max rel err %.3g (max_norm %g)", ts[t].name, s + 1, r,
                  (double)max_norm);
        }
    }
    // Final moments (what a checkpoint stores).
    const char *keys[2] = {"exp_avg", "exp_avg_sq"};
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < nt; t++) {
            const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(run, keys[k]), ts[t].name);
            CHECK(json_floats(o, want, FIX_MAX) == ts[t].n, "fixture: bad %s", keys[k]);
            float *got = k ? v[t] : m[t];
            double r = mt_test_max_rel(got, want, (size_t)ts[t].n, 1e-12);
            CHECK(r <= 1e-6, "vs torch: %s of %s max rel err %.3g", keys[k], ts[t].name, r);
            for (int i = 0; i < ts[t].n; i++) exact += got[i] == want[i];
            total += ts[t].n;
        }
    fprintf(stderr, "test_adamw: torch trajectory (max_norm %g): max rel err %.3g, %d/%d values bitwise equal\n",
            (double)max_norm, worst, exact, total);
    if (expect_bitwise) CHECK(exact == total, "torch's FMA kernels are mirrored, so expected all values bitwise equal");
}

static void test_torch_fixture(void) {
    char path[4096];
    const char *dir = getenv("MT_FIXTURE_DIR");
    if (dir) {
        snprintf(path, sizeof path, "%s/adamw_torch.json", dir);
    } else {
        // Next to this source file (absolute under CMake), else relative to the repo root.
        snprintf(path, sizeof path, "%s", __FILE__);
        char *slash = strrchr(path, '/');
        if (slash) snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "fixtures/adamw_torch.json");
        FILE *f = fopen(path, "rb");
        if (f) fclose(f);
        else snprintf(path, sizeof path, "megatrain/tests/fixtures/adamw_torch.json");
    }
    char *text = mt_test_read_text(path);
    CHECK(text != NULL, "%s: cannot read. HINT: run python3 megatrain/tests/fixtures/make_adamw_fixture.py", path);
    if (!text) return;
    cJSON *root = cJSON_Parse(text);
    free(text);
    CHECK(root != NULL, "%s: malformed JSON. HINT: regenerate with make_adamw_fixture.py", path);
    if (!root) return;
    const cJSON *hp = cJSON_GetObjectItem(root, "hparams");
    int steps = cJSON_GetObjectItem(hp, "steps")->valueint;
    const char *cap = cJSON_GetStringValue(cJSON_GetObjectItem(root, "torch_cpu_capability"));
    // torch's AVX2/AVX512 kernels use FMA in lerp and addcmul, as the reference does;
    // a fixture made on a DEFAULT-capability torch would differ in the last ulp.
    int expect_bitwise = cap && (!strcmp(cap, "AVX2") || !strcmp(cap, "AVX512"));
    fix_tensor ts[2];
    int nt = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "tensors")) {
        if (nt == 2) break;
        fix_tensor *x = &ts[nt++];
        memset(x, 0, sizeof *x);
        snprintf(x->name, sizeof x->name, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(t, "name")));
        x->wd = (float)cJSON_GetObjectItem(t, "weight_decay")->valuedouble;
        x->n = json_floats(cJSON_GetObjectItem(t, "init"), x->init, FIX_MAX);
        for (int s = 0; s < steps && s < 8; s++)
            CHECK(json_floats(cJSON_GetArrayItem(cJSON_GetObjectItem(t, "grads"), s), x->grads[s], FIX_MAX) == x->n,
                  "fixture: bad grads of %s", x->name);
    }
    CHECK(nt == 2 && steps > 0 && steps <= 8, "fixture: expected 2 tensors and 1..8 steps");
    if (nt == 2 && steps > 0 && steps <= 8) {
        const cJSON *run;
        cJSON_ArrayForEach(run, cJSON_GetObjectItem(root, "runs")) replay_run(run, ts, nt, hp, steps, expect_bitwise);
    }
    cJSON_Delete(root);
}

// ---- speed (informational) ----

static double best_of(double a, double b) { return a < b ? a : b; }

static void bench(void) {
    const char *skip = getenv("MT_SKIP_BENCH");
    if (skip && *skip && strcmp(skip, "0")) return;
    size_t n = (size_t)64 << 20;
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    if (!p || !g || !m || !v) {
        fprintf(stderr, "test_adamw: bench skipped (cannot allocate 1 GiB)\n");
        free(p), free(g), free(m), free(v);
        return;
    }
    // First touch from the threads that will use each chunk.
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        p[i] = 0.5f, g[i] = 1e-3f * (float)(i & 1023), m[i] = 0, v[i] = 0;
    }
    mt_adamw_hparams h = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 1};
    double t_adam = 1e30, t_mixed = 1e30, t_triad = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = omp_get_wtime();
        mt_adamw_update(NULL, p, MT_F32, g, MT_F32, m, v, n, &h, 0.1f);
        double dt = omp_get_wtime() - t0;
        if (r) t_adam = best_of(t_adam, dt); // the first pass pays page faults
        h.step++;
    }
    // mixed: master = p, bf16 p copy in the first half of g, bf16 grads in the second half.
    uint16_t *p16 = (uint16_t *)g, *g16 = (uint16_t *)g + n;
    // Real bf16 gradients: stale float bytes would hold denormals and NaNs, which run on microcode.
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) g16[i] = mt_f32_to_bf16(1e-3f * (float)(i & 1023));
    for (int r = 0; r < 3; r++) {
        double t0 = omp_get_wtime();
        mt_adamw_update(p, p16, MT_BF16, g16, MT_BF16, m, v, n, &h, 0.1f);
        t_mixed = best_of(t_mixed, omp_get_wtime() - t0);
        h.step++;
    }
    // STREAM triad a = b + s*c over three of the same buffers.
    for (int r = 0; r < 4; r++) {
        double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) p[i] = m[i] + 0.5f * v[i];
        double dt = omp_get_wtime() - t0;
        if (r) t_triad = best_of(t_triad, dt);
    }
    double adam_gbps = 28.0 * (double)n / t_adam / 1e9, triad_gbps = 12.0 * (double)n / t_triad / 1e9;
    double mixed_gbps = 28.0 * (double)n / t_mixed / 1e9; // master r/w, bf16 p w, bf16 g r, m, v r/w
    fprintf(stderr,
            "test_adamw: bench n=%zu, %d threads, %s: fp32 AdamW %.1f Mparam/s = %.2f GB/s (28 B/param); "
            "mixed (bf16 g, master, bf16 p) %.1f Mparam/s = %.2f GB/s (28 B/param); "
            "STREAM triad %.2f GB/s (12 B/elem as STREAM counts; %.2f GB/s with the write-allocate read); "
            "fp32 AdamW / triad = %.2f\n",
            n, omp_get_max_threads(), mt_adamw_isa(), n / t_adam / 1e6, adam_gbps, n / t_mixed / 1e6, mixed_gbps,
            triad_gbps, triad_gbps * 16.0 / 12.0, adam_gbps / triad_gbps);
    printf("{\"bench\":\"adamw\",\"n\":%zu,\"threads\":%d,\"isa\":\"%s\",\"fp32_gbps\":%.3f,\"fp32_mparams_per_s\":%.1f,"
           "\"mixed_gbps\":%.3f,\"triad_gbps\":%.3f,\"ratio\":%.3f}\n",
           n, omp_get_max_threads(), mt_adamw_isa(), adam_gbps, n / t_adam / 1e6, mixed_gbps, triad_gbps,
           adam_gbps / triad_gbps);
    free(p), free(g), free(m), free(v);
}

int main(void) {
    CHECK(!strcmp(mt_adamw_isa(), isa_name(mt_adamw_best_isa())), "mt_adamw_isa() names the dispatched path");
    test_bitwise();
    test_threads();
    test_torch_fixture();
    bench();
    return mt_test_finish("test_adamw");
}
