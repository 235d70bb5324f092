// test_adamw.c: the host AdamW. (1) every SIMD path this CPU runs (x86: AVX2,
// AVX-512; aarch64: NEON, SVE) and the threaded split are bitwise equal to
// mt_adamw_update_ref in every precision mode; (2) one step of every mode against a
// double-precision AdamW written here, independent of mt_adamw_elem (bf16 weights
// within 1 bf16 ulp); (3) the reference replays a torch.optim.AdamW trajectory
// (fixtures/adamw_torch.json) and the dispatched path a bf16 paper- and mixed-
// precision one (fixtures/adamw_torch_bf16.json); (4) speed against a STREAM triad
// on a 64M-element buffer (printed, never asserted; MT_SKIP_BENCH=1 skips it).
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
static void check_bitwise(mt_simd_isa isa, const mode *md, size_t n, float wd, float beta1) {
    state a, b;
    state_init(&a, md, n, 1000 + n);
    state_init(&b, md, n, 1000 + n);
    state_copy(&b, &a, md, n);
    void *g = malloc((n ? n : 1) * mt_dtype_size(md->gdt));
    int ok = 1;
    for (int step = 1; step <= 3 && ok; step++) {
        mt_adamw_hparams h = {.lr = 1e-2f, .beta1 = beta1, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.37f, .step = step};
        make_grad(g, md->gdt, n, 7 * step + n);
        mt_adamw_state sa = {.p = a.p, .m = a.m, .v = a.v, .master = a.master};
        mt_adamw_update_isa(isa, &sa, &sa, md->pdt, g, md->gdt, n, &h, wd);
        mt_adamw_update_ref(b.master, b.p, md->pdt, g, md->gdt, b.m, b.v, n, &h, wd);
        ok = state_equal(&a, &b, md, n);
        CHECK(ok, "%s path != reference: mode %s, n=%zu, wd=%g, beta1=%g, step %d", mt_simd_name(isa), md->name, n,
              (double)wd, (double)beta1, step);
    }
    free(g);
    state_free(&a);
    state_free(&b);
}

static void test_bitwise(void) {
    static const size_t NS[] = {0, 1, 7, 8, 15, 16, 17, 31, 33, 1000, 4099, 100003};
    static const float WDS[] = {0.0f, 0.1f};
    char ran[64] = "";
    for (int isa = 0; isa < MT_SIMD_COUNT; isa++) {
        if (!mt_simd_supported((mt_simd_isa)isa)) continue;
        for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++)
            for (size_t ni = 0; ni < sizeof NS / sizeof NS[0]; ni++)
                for (int wi = 0; wi < 2; wi++) check_bitwise((mt_simd_isa)isa, &MODES[mi], NS[ni], WDS[wi], 0.9f);
        // beta1 < 0.5 takes torch's other lerp branch.
        check_bitwise((mt_simd_isa)isa, &MODES[0], 1000, 0.1f, 0.3f);
        snprintf(ran + strlen(ran), sizeof ran - strlen(ran), "%s%s", ran[0] ? "," : "", mt_simd_name((mt_simd_isa)isa));
    }
#if defined(__aarch64__)
    CHECK(mt_simd_supported(MT_SIMD_NEON), "every aarch64 CPU has NEON (HWCAP_ASIMD), yet it is not detected");
#endif
    fprintf(stderr, "test_adamw: bitwise fast == ref on paths %s (dispatch picks %s)\n", ran, mt_adamw_isa());
}

// Out of place (the speculative step's update) on every path: the result written to
// `out` is bitwise the in-place update's, and `in` keeps every bit it had.
static void test_out_of_place(void) {
    static const size_t NS[] = {1, 17, 1000, 100003};
    int cases = 0;
    for (int isa = 0; isa < MT_SIMD_COUNT; isa++) {
        if (!mt_simd_supported((mt_simd_isa)isa)) continue;
        for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++)
            for (size_t ni = 0; ni < sizeof NS / sizeof NS[0]; ni++) {
                const mode *md = &MODES[mi];
                size_t n = NS[ni];
                state a, in, keep, out;
                state_init(&a, md, n, 77 + n);
                state_init(&in, md, n, 77 + n);
                state_init(&keep, md, n, 77 + n);
                state_init(&out, md, n, 9); // other bits: every one must be overwritten
                void *g = malloc(n * mt_dtype_size(md->gdt));
                int ok = 1;
                for (int step = 1; step <= 2 && ok; step++) {
                    mt_adamw_hparams h = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                          .grad_scale = 1.0f, .step = step};
                    make_grad(g, md->gdt, n, 31 * step + n);
                    mt_adamw_state sa = {.p = a.p, .m = a.m, .v = a.v, .master = a.master};
                    mt_adamw_state si = {.p = in.p, .m = in.m, .v = in.v, .master = in.master};
                    mt_adamw_state so = {.p = out.p, .m = out.m, .v = out.v, .master = out.master};
                    mt_adamw_update_isa((mt_simd_isa)isa, &sa, &sa, md->pdt, g, md->gdt, n, &h, 0.1f);
                    mt_adamw_update_isa((mt_simd_isa)isa, &so, &si, md->pdt, g, md->gdt, n, &h, 0.1f);
                    ok = state_equal(&out, &a, md, n) && state_equal(&in, &keep, md, n);
                    CHECK(ok, "%s out of place, mode %s, n=%zu, step %d: %s", mt_simd_name((mt_simd_isa)isa),
                          md->name, n, step, state_equal(&out, &a, md, n) ? "the input was written" : "!= in place");
                    // the next step reads what this one wrote, as a kept speculative update does
                    state_copy(&in, &out, md, n);
                    state_copy(&keep, &out, md, n);
                }
                cases++;
                free(g);
                state_free(&a);
                state_free(&in);
                state_free(&keep);
                state_free(&out);
            }
    }
    CHECK(cases > 0, "no path ran the out-of-place cases");
}

// Ranges (the embedding's rows first, then the others): each element as the whole pass
// leaves it, bitwise, on every path; the elements outside the ranges untouched. Ranges of
// odd lengths at odd offsets, neighbours, one longer than a piece of the threaded split.
static void test_ranges(void) {
    const size_t n = 200003;
    const mt_elem_range first[] = {{0, 3}, {17, 4113}, {4113, 4117}, {9001, 9001 + 70000}, {150001, 150002}};
    mt_elem_range rest[8];
    size_t nf = sizeof first / sizeof first[0], nrest = 0, prev = 0;
    for (size_t i = 0; i < nf; i++) {
        if (first[i].lo > prev) rest[nrest++] = (mt_elem_range){prev, first[i].lo};
        prev = first[i].hi;
    }
    rest[nrest++] = (mt_elem_range){prev, n};
    int cases = 0;
    for (int isa = 0; isa < MT_SIMD_COUNT; isa++) {
        if (!mt_simd_supported((mt_simd_isa)isa)) continue;
        for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
            const mode *md = &MODES[mi];
            state whole, parts, before;
            state_init(&whole, md, n, 5);
            state_init(&parts, md, n, 5);
            state_init(&before, md, n, 5);
            void *g = malloc(n * mt_dtype_size(md->gdt));
            make_grad(g, md->gdt, n, 99);
            mt_adamw_hparams h = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.7f,
                                  .step = 3};
            mt_adamw_state sw = {.p = whole.p, .m = whole.m, .v = whole.v, .master = whole.master};
            mt_adamw_state sp = {.p = parts.p, .m = parts.m, .v = parts.v, .master = parts.master};
            mt_adamw_update_isa((mt_simd_isa)isa, &sw, &sw, md->pdt, g, md->gdt, n, &h, 0.1f);
            mt_adamw_update_ranges_isa((mt_simd_isa)isa, &sp, md->pdt, g, md->gdt, first, nf, &h, 0.1f);
            // Only the first ranges changed so far: the rest is as it was.
            size_t ws = mt_dtype_size(md->pdt);
            int untouched = 1;
            for (size_t k = 0; k < nrest && untouched; k++) {
                size_t lo = rest[k].lo, len = rest[k].hi - rest[k].lo;
                untouched = !memcmp((char *)parts.p + lo * ws, (char *)before.p + lo * ws, len * ws) &&
                            !memcmp(parts.m + lo, before.m + lo, len * 4) && !memcmp(parts.v + lo, before.v + lo, len * 4);
            }
            CHECK(untouched, "%s ranges, mode %s: an element outside the ranges changed", mt_simd_name((mt_simd_isa)isa),
                  md->name);
            mt_adamw_update_ranges_isa((mt_simd_isa)isa, &sp, md->pdt, g, md->gdt, rest, nrest, &h, 0.1f);
            CHECK(state_equal(&parts, &whole, md, n), "%s ranges, mode %s: rows first then the rest != the whole pass",
                  mt_simd_name((mt_simd_isa)isa), md->name);
            cases++;
            free(g);
            state_free(&whole);
            state_free(&parts);
            state_free(&before);
        }
    }
    CHECK(cases > 0, "no path ran the ranges cases");
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

// ---- an independent double-precision AdamW (shares nothing with optim/) ----

// Spacing of f32 / bf16 values at |x| (24 / 8 significant bits, both with f32's exponent range).
static double ulp_of(double x, int bits) {
    int e;
    frexp(fabs(x), &e); // |x| in [2^(e-1), 2^e)
    int k = x == 0 ? -125 - bits : e - bits, sub = -125 - bits; // sub: the subnormal spacing
    return ldexp(1.0, k < sub ? sub : k);
}

typedef struct {
    double lr, beta1, beta2, eps, wd, scale;
    int step;
} dhp;

// One torch.optim.AdamW step in double: the textbook formula, not torch's op order.
static void adamw_double(double *p, double *m, double *v, double g, const dhp *h) {
    double gs = g * h->scale;
    *p *= 1.0 - h->lr * h->wd;
    *m = h->beta1 * *m + (1.0 - h->beta1) * gs;
    *v = h->beta2 * *v + (1.0 - h->beta2) * gs * gs;
    double bc1 = 1.0 - pow(h->beta1, h->step), bc2 = 1.0 - pow(h->beta2, h->step);
    *p -= h->lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + h->eps);
}

// The dispatched path, step by step, against adamw_double from the same state. Bounds
// (what f32 arithmetic in a few ops can be off by, never more): m and v within 4 f32
// ulps of the largest term; f32 weights within 2 ulps of |p| plus 8 of the update;
// bf16 weights (and mixed's bf16 copy) within half a bf16 ulp plus that, i.e. they
// are the double result rounded to nearest, up to f32 noise at a midpoint.
static void check_double_ref(const mode *md, float wd) {
    const size_t n = 4099;
    state s;
    state_init(&s, md, n, 77);
    void *g = malloc(n * mt_dtype_size(md->gdt));
    float *gf = malloc(n * sizeof(float));
    double worst[3] = {0, 0, 0}; // fraction of the bound used: weights, m, v
    size_t bad = 0;
    for (int step = 1; step <= 3; step++) {
        mt_test_fill_uniform(gf, n, 300 + step, -1.0f, 1.0f);
        for (size_t i = 0; i < n; i += 97) gf[i] = 0.0f;
        mt_convert(g, md->gdt, gf, MT_F32, n);
        dhp d = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .wd = wd, .scale = 0.37, .step = step};
        double *p0 = malloc(n * sizeof(double)), *m0 = malloc(n * sizeof(double)), *v0 = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            p0[i] = s.master ? s.master[i] : mt_load_f32(s.p, md->pdt, i);
            m0[i] = s.m[i], v0[i] = s.v[i];
        }
        mt_adamw_hparams h = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.37f, .step = step};
        mt_adamw_update(s.master, s.p, md->pdt, g, md->gdt, s.m, s.v, n, &h, wd);
        for (size_t i = 0; i < n; i++) {
            double p = p0[i], m = m0[i], v = v0[i], gi = mt_load_f32(g, md->gdt, i);
            double gs = gi * d.scale, step_abs;
            adamw_double(&p, &m, &v, gi, &d);
            step_abs = fabs(p - p0[i] * (1.0 - d.lr * d.wd));
            double tm = 4 * ulp_of(fmax(fmax(fabs(m0[i]), fabs(gs)), fabs(m)), 24);
            double tv = 4 * ulp_of(fmax(v0[i], v), 24);
            double tp = 2 * ulp_of(p, 24) + 8 * ulp_of(step_abs, 24);
            double em = fabs(s.m[i] - m) / tm, ev = fabs(s.v[i] - v) / tv, ep;
            if (s.master || md->pdt == MT_F32) {
                double got = s.master ? s.master[i] : ((float *)s.p)[i];
                ep = fabs(got - p) / tp;
            } else {
                ep = fabs(mt_load_f32(s.p, MT_BF16, i) - p) / (0.5 * ulp_of(p, 8) + tp);
            }
            if (s.master && md->pdt == MT_BF16) { // the bf16 copy: the master rounded to nearest
                double e16 = fabs(mt_load_f32(s.p, MT_BF16, i) - (double)s.master[i]) / (0.5 * ulp_of(s.master[i], 8));
                if (e16 > 1 || !(e16 == e16)) bad++;
            }
            worst[0] = fmax(worst[0], ep), worst[1] = fmax(worst[1], em), worst[2] = fmax(worst[2], ev);
            if (!(ep <= 1 && em <= 1 && ev <= 1)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s step %d i=%zu: p %.9g vs %.9g, m %.9g vs %.9g, v %.9g vs %.9g\n", md->name, step,
                            i, s.master ? s.master[i] : mt_load_f32(s.p, md->pdt, i), p, s.m[i], m, s.v[i], v);
            }
        }
        free(p0), free(m0), free(v0);
    }
    CHECK(bad == 0, "%s path vs double AdamW, mode %s, wd %g: %zu element(s) outside the bound", mt_adamw_isa(), md->name,
          (double)wd, bad);
    fprintf(stderr, "test_adamw: %s vs double AdamW, mode %-15s wd %.1f: worst weight %.3f, m %.3f, v %.3f of the bound\n",
            mt_adamw_isa(), md->name, (double)wd, worst[0], worst[1], worst[2]);
    free(g), free(gf);
    state_free(&s);
}

static void test_double_ref(void) {
    for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
        check_double_ref(&MODES[mi], 0.1f);
        check_double_ref(&MODES[mi], 0.0f);
    }
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

// ---- torch bf16 fixture: paper and mixed precision on the dispatched path ----

// Copies a JSON array of 16-bit patterns into h; returns its length (-1 if malformed).
static int json_bf16(const cJSON *a, uint16_t *h, int cap) {
    if (!cJSON_IsArray(a)) return -1;
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || n >= cap || e->valuedouble < 0 || e->valuedouble > 65535) return -1;
        h[n++] = (uint16_t)e->valueint;
    }
    return n;
}

#define FIXB_MAX 1024

// How many bf16 ulps (at the larger magnitude) apart two bf16 values are; NaN counts as far.
static double bf16_ulps(uint16_t a, uint16_t b) {
    double x = mt_bf16_to_f32(a), y = mt_bf16_to_f32(b);
    if (x != x || y != y) return 1e30;
    return fabs(x - y) / ulp_of(fmax(fabs(x), fabs(y)), 8);
}

// A path fixture (fixtures/adamw_torch_bf16.json): weights within 1 bf16 ulp of torch's
// (f32 noise may move a value across a rounding midpoint, never further), master
// and moments within 1e-6 relative; prints how many are bitwise equal.
static void replay_bf16_run(const cJSON *run, const cJSON *tensors, const cJSON *hp, int steps) {
    const char *mode = cJSON_GetStringValue(cJSON_GetObjectItem(run, "mode"));
    int mixed = mode && !strcmp(mode, "mixed");
    mt_adamw_hparams h = {.lr = (float)cJSON_GetObjectItem(hp, "lr")->valuedouble,
                          .beta1 = (float)cJSON_GetObjectItem(hp, "beta1")->valuedouble,
                          .beta2 = (float)cJSON_GetObjectItem(hp, "beta2")->valuedouble,
                          .eps = (float)cJSON_GetObjectItem(hp, "eps")->valuedouble,
                          .grad_scale = 1.0f};
    static uint16_t p[FIXB_MAX], g[FIXB_MAX], want16[FIXB_MAX];
    static float master[FIXB_MAX], m[FIXB_MAX], v[FIXB_MAX], want[FIXB_MAX];
    double worst_ulps = 0, worst_rel = 0;
    long exact = 0, total = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(t, "name"));
        float wd = (float)cJSON_GetObjectItem(t, "weight_decay")->valuedouble;
        int n = json_bf16(cJSON_GetObjectItem(t, "init_bf16"), p, FIXB_MAX);
        CHECK(name && n > 0, "bf16 fixture: bad tensor");
        if (!name || n <= 0) return;
        for (int i = 0; i < n; i++) master[i] = mt_bf16_to_f32(p[i]), m[i] = 0, v[i] = 0;
        for (int s = 0; s < steps; s++) {
            h.step = s + 1;
            CHECK(json_bf16(cJSON_GetArrayItem(cJSON_GetObjectItem(t, "grads_bf16"), s), g, FIXB_MAX) == n,
                  "bf16 fixture: bad grads of %s", name);
            mt_adamw_update(mixed ? master : NULL, p, MT_BF16, g, MT_BF16, m, v, (size_t)n, &h, wd);
            CHECK(json_bf16(cJSON_GetArrayItem(cJSON_GetObjectItem(run, name), s), want16, FIXB_MAX) == n,
                  "bf16 fixture: bad %s step %d", name, s + 1);
            for (int i = 0; i < n; i++) {
                double u = bf16_ulps(p[i], want16[i]);
                worst_ulps = fmax(worst_ulps, u);
                exact += p[i] == want16[i];
                CHECK(u <= 1.0, "%s vs torch (%s): %s[%d] step %d: %.9g vs %.9g, %.3g bf16 ulps", mt_adamw_isa(),
                      mode, name, i, s + 1, (double)mt_bf16_to_f32(p[i]), (double)mt_bf16_to_f32(want16[i]), u);
            }
            total += n;
            if (mixed) {
                char key[32];
                snprintf(key, sizeof key, "master_%s", name);
                CHECK(json_floats(cJSON_GetArrayItem(cJSON_GetObjectItem(run, key), s), want, FIXB_MAX) == n,
                      "bf16 fixture: bad %s step %d", key, s + 1);
                double r = mt_test_max_rel(master, want, (size_t)n, 1e-12);
                worst_rel = fmax(worst_rel, r);
                CHECK(r <= 1e-6, "%s vs torch (mixed): master %s step %d max rel err %.3g", mt_adamw_isa(), name, s + 1, r);
            }
        }
        const char *keys[2] = {"exp_avg", "exp_avg_sq"};
        for (int k = 0; k < 2; k++) {
            CHECK(json_floats(cJSON_GetObjectItem(cJSON_GetObjectItem(run, keys[k]), name), want, FIXB_MAX) == n,
                  "bf16 fixture: bad %s of %s", keys[k], name);
            double r = mt_test_max_rel(k ? v : m, want, (size_t)n, 1e-12);
            worst_rel = fmax(worst_rel, r);
            CHECK(r <= 1e-6, "%s vs torch (%s): %s of %s max rel err %.3g", mt_adamw_isa(), mode, keys[k], name, r);
        }
    }
    fprintf(stderr,
            "test_adamw: %s vs torch bf16 %s precision: %ld/%ld bf16 weights bitwise equal, worst %.0f ulp; "
            "moments%s max rel err %.3g\n",
            mt_adamw_isa(), mode, exact, total, worst_ulps, mixed ? " and master" : "", worst_rel);
}

static void test_torch_bf16_fixture(void) {
    char path[4096];
    const char *dir = getenv("MT_FIXTURE_DIR");
    if (dir) snprintf(path, sizeof path, "%s/adamw_torch_bf16.json", dir);
    else snprintf(path, sizeof path, "megatrain/tests/fixtures/adamw_torch_bf16.json"); // CTest runs from the repo root
    char *text = mt_test_read_text(path);
    CHECK(text != NULL, "%s: cannot read. HINT: run from the repo root, or python3 "
                        "megatrain/tests/fixtures/make_adamw_fixture.py", path);
    if (!text) return;
    cJSON *root = cJSON_Parse(text);
    free(text);
    CHECK(root != NULL, "%s: malformed JSON. HINT: regenerate with make_adamw_fixture.py", path);
    if (!root) return;
    const cJSON *hp = cJSON_GetObjectItem(root, "hparams");
    const cJSON *steps = cJSON_GetObjectItem(hp, "steps");
    int nruns = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItem(root, "runs")) {
        replay_bf16_run(run, cJSON_GetObjectItem(root, "tensors"), hp, steps ? steps->valueint : 0);
        nruns++;
    }
    CHECK(nruns == 2 && steps && steps->valueint > 0, "%s: expected a paper and a mixed run", path);
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
    CHECK(!strcmp(mt_adamw_isa(), mt_simd_name(mt_simd_best())), "mt_adamw_isa() names the dispatched path");
    CHECK(mt_simd_supported(mt_simd_best()), "the dispatched path %s is one this CPU runs", mt_adamw_isa());
    test_bitwise();
    test_threads();
    test_out_of_place();
    test_ranges();
    test_double_ref();
    test_torch_fixture();
    test_torch_bf16_fixture();
    bench();
    return mt_test_finish("test_adamw");
}
