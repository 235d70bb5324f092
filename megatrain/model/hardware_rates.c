// hardware_rates.c: a profile's optional measured rates (keys in
// experiments/hardware/README.md): the attention tables (by T, and by the work of one
// launch), the backward GEMM efficiency, the memory-bound kernels' bandwidths and the host's
// gradient sum of squares, and the attention rate looked up from them. Every figure read here is a measurement, so each
// must name its source (its own sources entry, or its family's: "gpu.kernel_gbps").
#include "model/hardware_rates.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// The loader's plausible ranges (hardware_profile.c): they refuse a unit mix-up.
#define TFLOPS_LO 1e-3
#define TFLOPS_HI 1e6
#define GBPS_LO 1e-3
#define GBPS_HI 1e6
#define FRACTION_LO 1e-3

static const char *const kernel_names[MT_HW_KERNELS] = {
    "embedding_fwd", "embedding_bwd", "rmsnorm_fwd", "rmsnorm_bwd", "add_rmsnorm_fwd",
    "rmsnorm_bwd_add", "qk_norm_fwd", "qk_norm_bwd", "rope_fwd", "rope_bwd",
    "swiglu_fwd", "swiglu_bwd", "add", "xent_fwd_bwd", "cast"};

const char *mt_hw_kernel_name(mt_hw_kernel k) { return k >= 0 && k < MT_HW_KERNELS ? kernel_names[k] : "?"; }

// The sources entry of `key` ("gpu.kernel_gbps.add") or of its family ("gpu.kernel_gbps").
static const char *source_of(const cJSON *root, const char *key) {
    const cJSON *srcs = cJSON_GetObjectItemCaseSensitive(root, "sources");
    if (!cJSON_IsObject(srcs)) return NULL;
    char k[96];
    snprintf(k, sizeof k, "%s", key);
    for (int up = 0; up < 2; up++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(srcs, k);
        if (cJSON_IsString(s) && s->valuestring[0]) return s->valuestring;
        char *dot = strrchr(k, '.');
        if (!dot || dot == strchr(k, '.')) break; // never up to "gpu"
        *dot = 0;
    }
    return NULL;
}

static mt_status need_source(const char *path, const cJSON *root, const char *key, const char **out) {
    const char *s = source_of(root, key);
    if (!s)
        return mt_fail(MT_ERR_FORMAT, "%s: sources.\"%s\": every measured figure needs its source", path, key);
    if (out) *out = s;
    return MT_OK;
}

// gpu.<key> (optional): {"<kernel>": [[x, tflops], ...], ...}: ascending whole x (T, or
// B*NH*T^2 for a work table), each table with its source.
static mt_status parse_tables(const char *path, const cJSON *root, const char *key, const char *xname,
                              mt_hw_attn_rate *tabs, int *n_tabs) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "gpu"), key);
    if (!a) return MT_OK;
    if (!cJSON_IsObject(a)) return mt_fail(MT_ERR_FORMAT, "%s: gpu.%s: expected an object", path, key);
    const cJSON *k;
    cJSON_ArrayForEach(k, a) {
        if (*n_tabs == MT_HW_ATTN_KERNELS)
            return mt_fail(MT_ERR_FORMAT, "%s: gpu.%s: more than %d implementations", path, key, MT_HW_ATTN_KERNELS);
        mt_hw_attn_rate *r = &tabs[(*n_tabs)++];
        if (strlen(k->string) >= sizeof r->kernel)
            return mt_fail(MT_ERR_FORMAT, "%s: gpu.%s.%s: name too long", path, key, k->string);
        snprintf(r->kernel, sizeof r->kernel, "%s", k->string);
        int n = cJSON_GetArraySize(k);
        if (!cJSON_IsArray(k) || n < 1 || n > MT_HW_ATTN_POINTS)
            return mt_fail(MT_ERR_FORMAT, "%s: gpu.%s.%s: expected 1..%d points [%s, tflops]", path, key, r->kernel,
                           MT_HW_ATTN_POINTS, xname);
        for (int i = 0; i < n; i++) {
            const cJSON *pt = cJSON_GetArrayItem(k, i);
            const cJSON *x = cJSON_GetArrayItem(pt, 0), *f = cJSON_GetArrayItem(pt, 1);
            if (!cJSON_IsArray(pt) || cJSON_GetArraySize(pt) != 2 || !cJSON_IsNumber(x) || !cJSON_IsNumber(f))
                return mt_fail(MT_ERR_FORMAT, "%s: gpu.%s.%s[%d]: expected [%s, tflops]", path, key, r->kernel, i,
                               xname);
            r->x[i] = x->valuedouble, r->tflops[i] = f->valuedouble;
            if (!(r->x[i] >= 1) || r->x[i] != floor(r->x[i]) || (i && r->x[i] <= r->x[i - 1]))
                return mt_fail(MT_ERR_FORMAT, "%s: gpu.%s.%s[%d]: %s must be whole and ascending", path, key, r->kernel,
                               i, xname);
            if (!(r->tflops[i] >= TFLOPS_LO && r->tflops[i] <= TFLOPS_HI))
                return mt_fail(MT_ERR_FORMAT, "%s: gpu.%s.%s[%d]: %g TFLOP/s is outside [%g, %g]", path, key,
                               r->kernel, i, r->tflops[i], TFLOPS_LO, TFLOPS_HI);
        }
        r->n = n;
        char full[96];
        snprintf(full, sizeof full, "gpu.%s.%s", key, r->kernel);
        const char *src = source_of(root, full);
        if (!src)
            return mt_fail(MT_ERR_FORMAT, "%s: sources.\"%s\": every attention table needs its source", path, full);
        snprintf(r->source, sizeof r->source, "%s", src);
    }
    return MT_OK;
}

// gpu.gemm_bwd_efficiency (optional): a fraction of the dense peak, as gemm_efficiency.
static mt_status parse_gemm_bwd(const char *path, const cJSON *root, mt_hw_profile *p) {
    const char *key = "gpu.gemm_bwd_efficiency";
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "gpu"), "gemm_bwd_efficiency");
    if (!v) return MT_OK;
    if (!cJSON_IsNumber(v)) return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a number", path, key);
    if (!(v->valuedouble >= FRACTION_LO && v->valuedouble <= 1))
        return mt_fail(MT_ERR_FORMAT, "%s: %s: %g is outside [%g, 1] (a fraction of the dense peak)", path, key,
                       v->valuedouble, FRACTION_LO);
    p->gemm_bwd_efficiency = v->valuedouble;
    return need_source(path, root, key, NULL);
}

// gpu.kernel_gbps (optional): {"<kernel>": GB/s, ...}, kernels of mt_hw_kernel_name only.
static mt_status parse_kernels(const char *path, const cJSON *root, mt_hw_profile *p) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "gpu"), "kernel_gbps");
    if (!o) return MT_OK;
    if (!cJSON_IsObject(o)) return mt_fail(MT_ERR_FORMAT, "%s: gpu.kernel_gbps: expected an object", path);
    const cJSON *e;
    cJSON_ArrayForEach(e, o) {
        int k = 0;
        while (k < MT_HW_KERNELS && strcmp(kernel_names[k], e->string)) k++;
        if (k == MT_HW_KERNELS) {
            char known[512] = "";
            for (int i = 0; i < MT_HW_KERNELS; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", kernel_names[i]);
            return mt_fail(MT_ERR_FORMAT, "%s: gpu.kernel_gbps.%s: not a kernel the sim prices by bytes (%s)", path,
                           e->string, known);
        }
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= GBPS_LO && e->valuedouble <= GBPS_HI))
            return mt_fail(MT_ERR_FORMAT, "%s: gpu.kernel_gbps.%s: expected GB/s in [%g, %g]", path, e->string,
                           GBPS_LO, GBPS_HI);
        p->kernel_gbps[k] = e->valuedouble;
        char key[96];
        snprintf(key, sizeof key, "gpu.kernel_gbps.%s", e->string);
        MT_TRY(need_source(path, root, key, NULL));
    }
    return MT_OK;
}

// host.grad_sumsq_gbps (optional): GB/s of one read of the gradients.
static mt_status parse_grad_sumsq(const char *path, const cJSON *root, mt_hw_profile *p) {
    const char *key = "host.grad_sumsq_gbps";
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "host"), "grad_sumsq_gbps");
    if (!v) return MT_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= GBPS_LO && v->valuedouble <= GBPS_HI))
        return mt_fail(MT_ERR_FORMAT, "%s: %s: expected GB/s in [%g, %g]", path, key, GBPS_LO, GBPS_HI);
    p->grad_sumsq_gbps = v->valuedouble;
    return need_source(path, root, key, NULL);
}

mt_status mt_hw_parse_rates(const char *path, const cJSON *root, mt_hw_profile *p) {
    MT_TRY(parse_tables(path, root, "attention_tflops", "T", p->attn, &p->n_attn));
    MT_TRY(parse_tables(path, root, "attention_work_tflops", "B*NH*T^2", p->attn_work, &p->n_attn_work));
    MT_TRY(parse_gemm_bwd(path, root, p));
    MT_TRY(parse_grad_sumsq(path, root, p));
    return parse_kernels(path, root, p);
}

static const mt_hw_attn_rate *table_of(const mt_hw_attn_rate *tabs, int n, const char *kernel) {
    for (int i = 0; kernel && i < n; i++)
        if (!strcmp(tabs[i].kernel, kernel)) return &tabs[i];
    return NULL;
}

// Linear in log x between measured points, flat beyond the ends.
static double interpolate(const mt_hw_attn_rate *r, double x) {
    if (x <= r->x[0]) return r->tflops[0];
    for (int i = 1; i < r->n; i++)
        if (x <= r->x[i]) {
            double f = log(x / r->x[i - 1]) / log(r->x[i] / r->x[i - 1]);
            return r->tflops[i - 1] + f * (r->tflops[i] - r->tflops[i - 1]);
        }
    return r->tflops[r->n - 1];
}

double mt_hw_attention_tflops(const mt_hw_profile *p, const char *kernel, int bf16, double B, double NH, double T,
                              const char **source) {
    const mt_hw_attn_rate *w = bf16 ? table_of(p->attn_work, p->n_attn_work, kernel) : NULL;
    const mt_hw_attn_rate *t = bf16 ? table_of(p->attn, p->n_attn, kernel) : NULL;
    if (w) {
        if (source) *source = w->source;
        return interpolate(w, B * NH * T * T);
    }
    if (t) {
        if (source) *source = t->source;
        return interpolate(t, T);
    }
    if (source) *source = "assumed: 0.35 x dense peak (no measurement of this implementation in the profile)";
    return MT_ATTN_ASSUMED_EFF * p->peak_tflops[bf16 ? MT_PEAK_BF16 : MT_PEAK_FP32];
}
