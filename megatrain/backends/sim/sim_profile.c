// sim_profile.c: reads the figures of a megatrain.hardware/1 profile that the
// simulator prices with; each missing or invalid key is one error line naming
// the file and the dotted key.
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/sim/sim.h"

static mt_status read_text(const char *path, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mt_fail(MT_ERR_IO, "%s: cannot open the hardware profile: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return mt_fail(MT_ERR_IO, "%s: cannot read the hardware profile", path);
    }
    long n = ftell(f);
    rewind(f);
    if (n < 0 || n > (16L << 20)) {
        fclose(f);
        return mt_fail(MT_ERR_FORMAT, "%s: not a hardware profile (size %ld bytes)", path, n);
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return mt_fail(MT_ERR_MEMORY, "%s: cannot allocate %ld bytes", path, n);
    }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(buf);
        return mt_fail(MT_ERR_IO, "%s: short read", path);
    }
    buf[n] = 0;
    *out = buf;
    return MT_OK;
}

// Walks a dotted key ("link.h2d_gbps.pinned") from the root object.
static const cJSON *lookup(const cJSON *root, const char *key) {
    char part[64];
    const cJSON *v = root;
    const char *p = key;
    while (v && *p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (len >= sizeof part) return NULL;
        memcpy(part, p, len);
        part[len] = 0;
        v = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, part) : NULL;
        p += len + (dot ? 1 : 0);
    }
    return v;
}

static mt_status num(const char *path, const cJSON *root, const char *key, double *out) {
    const cJSON *v = lookup(root, key);
    if (!v) return mt_fail(MT_ERR_FORMAT, "%s: %s: required number is missing", path, key);
    if (!cJSON_IsNumber(v)) return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a number", path, key);
    if (!(v->valuedouble > 0)) return mt_fail(MT_ERR_FORMAT, "%s: %s: must be positive (got %g)", path, key, v->valuedouble);
    *out = v->valuedouble;
    return MT_OK;
}

static mt_status str(const char *path, const cJSON *root, const char *key, char *out, size_t cap) {
    const cJSON *v = lookup(root, key);
    if (!v) return mt_fail(MT_ERR_FORMAT, "%s: %s: required string is missing", path, key);
    if (!cJSON_IsString(v) || !v->valuestring[0]) return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a non-empty string", path, key);
    snprintf(out, cap, "%s", v->valuestring);
    return MT_OK;
}

static mt_status parse(const char *path, const cJSON *j, mt_sim_profile *p) {
    const cJSON *schema = lookup(j, "schema");
    if (schema && (!cJSON_IsString(schema) || strcmp(schema->valuestring, "megatrain.hardware/1") != 0))
        return mt_fail(MT_ERR_FORMAT, "%s: schema: expected \"megatrain.hardware/1\"", path);
    MT_TRY(str(path, j, "name", p->name, sizeof p->name));
    MT_TRY(str(path, j, "gpu.name", p->gpu_name, sizeof p->gpu_name));
    MT_TRY(num(path, j, "gpu.peak_tflops.bf16", &p->peak_bf16_tflops));
    MT_TRY(num(path, j, "gpu.peak_tflops.fp32", &p->peak_fp32_tflops));
    MT_TRY(num(path, j, "gpu.gemm_efficiency", &p->gemm_efficiency));
    MT_TRY(num(path, j, "gpu.hbm_gbps", &p->hbm_gbps));
    MT_TRY(num(path, j, "gpu.hbm_bytes", &p->hbm_bytes));
    MT_TRY(num(path, j, "link.h2d_gbps.pinned", &p->h2d_pinned_gbps));
    MT_TRY(num(path, j, "link.h2d_gbps.pageable", &p->h2d_pageable_gbps));
    MT_TRY(num(path, j, "link.d2h_gbps.pinned", &p->d2h_pinned_gbps));
    MT_TRY(num(path, j, "link.d2h_gbps.pageable", &p->d2h_pageable_gbps));
    MT_TRY(num(path, j, "link.duplex_factor", &p->duplex_factor));
    MT_TRY(num(path, j, "host.mem_bytes", &p->host_mem_bytes));
    MT_TRY(num(path, j, "host.mem_gbps", &p->host_mem_gbps));
    MT_TRY(num(path, j, "host.adamw_params_per_s.fp32", &p->adamw_params_per_s_fp32));
    MT_TRY(num(path, j, "host.adamw_params_per_s.paper", &p->adamw_params_per_s_paper));
    MT_TRY(num(path, j, "host.adamw_params_per_s.mixed", &p->adamw_params_per_s_mixed));
    if (p->gemm_efficiency > 1) return mt_fail(MT_ERR_FORMAT, "%s: gpu.gemm_efficiency: must be in (0, 1] (got %g)", path, p->gemm_efficiency);
    if (p->duplex_factor > 1) return mt_fail(MT_ERR_FORMAT, "%s: link.duplex_factor: must be in (0, 1] (got %g)", path, p->duplex_factor);
    return MT_OK;
}

mt_status mt_sim_profile_load(const char *path, mt_sim_profile *out) {
    memset(out, 0, sizeof *out);
    char *text;
    MT_TRY(read_text(path, &text));
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return mt_fail(MT_ERR_FORMAT, "%s: malformed JSON (expected a megatrain.hardware/1 object)", path);
    }
    mt_status s = parse(path, j, out);
    cJSON_Delete(j);
    if (s == MT_OK) snprintf(out->path, sizeof out->path, "%s", path);
    return s;
}
