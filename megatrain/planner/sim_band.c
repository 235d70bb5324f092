// sim_band.c: the sim's error band per hardware profile, from the validation file
// (sim_band.h). The band is what was measured, never extrapolated to a number:
// off a validated machine it is marked grown, with the file's own sentence on why.
#include "planner/sim_band.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/env.h"
#include "core/json_file.h"

// Where the file is looked for when $MT_SIM_VALIDATION is not set; "" when nowhere.
static void default_path(char *buf, size_t cap) {
    buf[0] = 0;
    if (access("results/sim_validation.json", F_OK) == 0) {
        snprintf(buf, cap, "results/sim_validation.json");
        return;
    }
#ifdef MT_SOURCE_DIR
    snprintf(buf, cap, "%s/results/sim_validation.json", MT_SOURCE_DIR);
    if (access(buf, F_OK) != 0) buf[0] = 0;
#endif
}

static mt_status number(const char *path, const char *name, const cJSON *e, const char *key, double lo, double hi,
                        double *out) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, key);
    if (!cJSON_IsNumber(x))
        return mt_fail(MT_ERR_FORMAT, "%s: profiles.%s.%s: required number is missing", path, name, key);
    if (!(x->valuedouble >= lo && x->valuedouble <= hi))
        return mt_fail(MT_ERR_FORMAT, "%s: profiles.%s.%s: %g is outside [%g, %g]", path, name, key, x->valuedouble, lo,
                       hi);
    *out = x->valuedouble;
    return MT_OK;
}

static mt_status read_entry(const char *path, const cJSON *e, mt_sim_validated *p) {
    const char *name = e->string;
    if (!cJSON_IsObject(e)) return mt_fail(MT_ERR_FORMAT, "%s: profiles.%s: expected an object", path, name);
    if (strlen(name) >= sizeof p->profile)
        return mt_fail(MT_ERR_FORMAT, "%s: profiles.%s: profile name too long", path, name);
    snprintf(p->profile, sizeof p->profile, "%s", name);
    const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(e, "gpu");
    if (!cJSON_IsString(gpu) || !*gpu->valuestring)
        return mt_fail(MT_ERR_FORMAT, "%s: profiles.%s.gpu: required string is missing", path, name);
    snprintf(p->gpu, sizeof p->gpu, "%s", gpu->valuestring);
    double n = 0;
    // An error of 100% or more is still a band; 10x is past anything a model should be trusted with.
    MT_TRY(number(path, name, e, "n", 1, 1e6, &n));
    if (n != floor(n)) return mt_fail(MT_ERR_FORMAT, "%s: profiles.%s.n: %g is not a whole count", path, name, n);
    p->n = (int)n;
    MT_TRY(number(path, name, e, "worst_abs_err", 0, 10, &p->worst_abs_err));
    MT_TRY(number(path, name, e, "median_abs_err", 0, 10, &p->median_abs_err));
    MT_TRY(number(path, name, e, "within", 0, 10, &p->within));
    if (p->median_abs_err > p->worst_abs_err)
        return mt_fail(MT_ERR_FORMAT, "%s: profiles.%s: median_abs_err %g exceeds worst_abs_err %g", path, name,
                       p->median_abs_err, p->worst_abs_err);
    return MT_OK;
}

mt_status mt_sim_validation_load(mt_sim_validation *v) {
    memset(v, 0, sizeof *v);
    const char *env;
    MT_TRY(mt_env_text("MT_SIM_VALIDATION", &env));
    if (env) {
        if (access(env, F_OK) != 0)
            return mt_fail(MT_ERR_IO, "MT_SIM_VALIDATION=%s: no such file (unset it to read results/sim_validation.json)",
                           env);
        snprintf(v->path, sizeof v->path, "%s", env);
    } else {
        default_path(v->path, sizeof v->path);
        if (!v->path[0]) return MT_OK; // nothing validated yet: every band unvalidated
    }
    cJSON *j;
    MT_TRY(mt_json_load(v->path, "the sim's validation (megatrain.sim_validation/1)", 16u << 20, &j));
    mt_status s = MT_OK;
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(j, "schema");
    const cJSON *profiles = cJSON_GetObjectItemCaseSensitive(j, "profiles");
    const cJSON *growth = cJSON_GetObjectItemCaseSensitive(j, "growth");
    if (!cJSON_IsString(schema) || strcmp(schema->valuestring, MT_SIM_VALIDATION_SCHEMA))
        s = mt_fail(MT_ERR_FORMAT, "%s: schema: expected \"%s\"", v->path, MT_SIM_VALIDATION_SCHEMA);
    else if (!cJSON_IsObject(profiles))
        s = mt_fail(MT_ERR_FORMAT, "%s: profiles: required object is missing", v->path);
    else if (growth && !cJSON_IsString(growth))
        s = mt_fail(MT_ERR_FORMAT, "%s: growth: expected a string", v->path);
    if (s == MT_OK && growth) snprintf(v->growth, sizeof v->growth, "%s", growth->valuestring);
    for (const cJSON *e = s == MT_OK ? profiles->child : NULL; e && s == MT_OK; e = e->next) {
        if (v->n == MT_SIM_VALIDATION_MAX)
            s = mt_fail(MT_ERR_FORMAT, "%s: profiles: more than %d", v->path, MT_SIM_VALIDATION_MAX);
        else
            s = read_entry(v->path, e, &v->p[v->n++]);
    }
    cJSON_Delete(j);
    return s;
}

static int percent(double frac) { return (int)ceil(frac * 100 - 1e-9); } // rounded up: a band never shrinks in print

void mt_sim_band_of(const mt_sim_validation *v, const char *profile, const char *gpu, mt_sim_band *out) {
    memset(out, 0, sizeof *out);
    const mt_sim_validated *same = NULL, *gpu_only = NULL;
    for (int i = 0; i < v->n; i++) {
        if (!strcmp(v->p[i].profile, profile)) same = &v->p[i];
        // Off the validated machine the widest band of that GPU is the floor (a host never measured only adds error).
        else if (gpu && *gpu && !strcmp(v->p[i].gpu, gpu) && (!gpu_only || v->p[i].worst_abs_err > gpu_only->worst_abs_err))
            gpu_only = &v->p[i];
    }
    if (same) {
        out->kind = MT_BAND_VALIDATED;
        out->kind_name = "validated";
        out->from = same;
        snprintf(out->text, sizeof out->text, "±%d%% (worst of %d measured configs)", percent(same->worst_abs_err), same->n);
        snprintf(out->cell, sizeof out->cell, "±%d%% (n=%d)", percent(same->worst_abs_err), same->n);
        return;
    }
    if (gpu_only) {
        out->kind = MT_BAND_GROWN;
        out->kind_name = "grown";
        out->from = gpu_only;
        snprintf(out->text, sizeof out->text, "at least ±%d%%, grown (worst of %d measured configs on %s)",
                 percent(gpu_only->worst_abs_err), gpu_only->n, gpu_only->profile);
        snprintf(out->cell, sizeof out->cell, ">=±%d%% grown", percent(gpu_only->worst_abs_err));
        snprintf(out->why, sizeof out->why,
                 "its GPU (%s) was measured as profile %s, its host (memory, link, CPU) never was, so the error can be "
                 "wider than there%s%s",
                 gpu, gpu_only->profile, v->growth[0] ? ": " : "", v->growth);
        return;
    }
    out->kind = MT_BAND_UNVALIDATED;
    out->kind_name = "unvalidated";
    snprintf(out->cell, sizeof out->cell, "unvalidated");
    if (!v->path[0]) { // nothing validated yet anywhere: say that, not that this GPU was never measured
        snprintf(out->text, sizeof out->text, "unvalidated (no results/sim_validation.json yet)");
        snprintf(out->why, sizeof out->why, "the harness writes the sim's error against measured runs there");
        return;
    }
    snprintf(out->text, sizeof out->text, "unvalidated (no measured configuration on this GPU)");
    snprintf(out->why, sizeof out->why, "no profile in %.600s has the GPU %s", v->path, gpu && *gpu ? gpu : "(unnamed)");
}
