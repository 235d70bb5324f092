// hardware_profile.c: reading and validating experiments/hardware/NAME.json
// (schema megatrain.hardware/1, keys in experiments/hardware/README.md), and
// finding a profile by name. The optional measured GPU rates: hardware_rates.c.
#define _DEFAULT_SOURCE // readlink, strdup under -std=c11

#include "model/hardware_profile.h"

#include "core/env.h"
#include "core/json_file.h"
#include "model/hardware_rates.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEMA "megatrain.hardware/1"
#define MAX_BYTES (16u << 20) // far above any profile: a larger file is something else

// Walks a dotted key ("link.h2d_gbps.pinned") from the root object.
static const cJSON *dotted(const cJSON *root, const char *key) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", key);
    const cJSON *o = root;
    for (char *tok = strtok(buf, "."); tok && o; tok = strtok(NULL, "."))
        o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, tok) : NULL;
    return o;
}

// Plausible ranges, several orders of magnitude around today's machines on each
// side: they admit any real or projected machine and refuse a value in the wrong
// unit (bytes/s where GB/s is meant, GB where bytes are) and the extremes that
// would turn a prediction into 0, inf or NaN. (hardware_rates.c checks the optional
// measured rates against the same TFLOPS, GBPS and FRACTION bounds.)
typedef struct {
    double lo, hi;
    int whole; // must be an integer (a count, or bytes)
} range;
static const range TFLOPS = {1e-3, 1e6, 0};   // 1 GFLOP/s .. 1 EFLOP/s per GPU (H200 bf16: 989)
static const range GBPS = {1e-3, 1e6, 0};     // 1 MB/s .. 1 PB/s (PCIe Gen5: 63, HBM3e: 4800)
static const range BYTES = {1e6, 1e16, 1};    // 1 MB .. 10 PB (H200: 1.41e11, 1.5 TB hosts: 1.5e12)
static const range FRACTION = {1e-3, 1, 0};   // efficiencies and duplex shares
static const range CORES = {1, 1e5, 1};
static const range NODES = {1, 1024, 1};
static const range PARAMS_PER_S = {1e3, 1e14, 0}; // host AdamW rate (the 2-core dev VM: ~1.5e9)

// A number at dotted key `key` within r.
static mt_status num(const char *path, const cJSON *root, const char *key, range r, double *out) {
    const cJSON *v = dotted(root, key);
    if (!v) return mt_fail(MT_ERR_FORMAT, "%s: %s: required number is missing", path, key);
    if (!cJSON_IsNumber(v)) return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a number", path, key);
    double d = v->valuedouble;
    if (!(d > 0)) return mt_fail(MT_ERR_FORMAT, "%s: %s: must be positive (got %g)", path, key, d);
    if (d < r.lo || d > r.hi)
        return mt_fail(MT_ERR_FORMAT, "%s: %s: %g is outside the plausible range [%g, %g] (a unit mix-up?)", path, key,
                       d, r.lo, r.hi);
    if (r.whole && d != floor(d))
        return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a whole number, got %g", path, key, d);
    *out = d;
    return MT_OK;
}

static mt_status str(const char *path, const cJSON *root, const char *key, char *out, size_t cap) {
    const cJSON *v = dotted(root, key);
    if (!v) return mt_fail(MT_ERR_FORMAT, "%s: %s: required string is missing", path, key);
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a non-empty string", path, key);
    snprintf(out, cap, "%s", v->valuestring);
    return MT_OK;
}

// gpu.name_match (optional): ["H100", "*"]: 1..MT_HW_NAME_MATCH non-empty strings.
static mt_status parse_name_match(const char *path, const cJSON *j, mt_hw_profile *p) {
    const cJSON *m = dotted(j, "gpu.name_match"), *e;
    if (!m) return MT_OK;
    int n = cJSON_GetArraySize(m);
    if (!cJSON_IsArray(m) || n < 1 || n > MT_HW_NAME_MATCH)
        return mt_fail(MT_ERR_FORMAT, "%s: gpu.name_match: expected 1..%d strings", path, MT_HW_NAME_MATCH);
    cJSON_ArrayForEach(e, m) {
        if (!cJSON_IsString(e) || !e->valuestring[0] || strlen(e->valuestring) >= sizeof p->gpu_name_match[0])
            return mt_fail(MT_ERR_FORMAT, "%s: gpu.name_match: expected non-empty strings of at most %zu characters",
                           path, sizeof p->gpu_name_match[0] - 1);
        snprintf(p->gpu_name_match[p->n_gpu_name_match++], sizeof p->gpu_name_match[0], "%s", e->valuestring);
    }
    return MT_OK;
}

// An optional number: absent leaves *out at 0; present, it is checked as num() checks.
static mt_status opt_num(const char *path, const cJSON *root, const char *key, range r, double *out) {
    if (!dotted(root, key)) return MT_OK;
    return num(path, root, key, r, out);
}

// multi.* (optional, planner/ranks.c): the machine's several GPUs and hosts.
static mt_status parse_multi(const char *path, const cJSON *j, mt_hw_profile *p) {
    static const range GPUS = {1, 1024, 1};
    double g = 0, s = 0;
    mt_hw_multi *m = &p->multi;
    MT_TRY(opt_num(path, j, "multi.gpus_per_host", GPUS, &g));
    MT_TRY(opt_num(path, j, "multi.gpus_per_pcie_switch", GPUS, &s));
    m->gpus_per_host = (int)g, m->gpus_per_pcie_switch = (int)s;
    if (g && s && s > g)
        return mt_fail(MT_ERR_FORMAT, "%s: multi.gpus_per_pcie_switch: %g is more than multi.gpus_per_host %g", path, s,
                       g);
    MT_TRY(opt_num(path, j, "multi.pcie_switch_uplink_gbps", GBPS, &m->pcie_uplink_gbps));
    MT_TRY(opt_num(path, j, "multi.nvlink_gbps", GBPS, &m->nvlink_gbps));
    MT_TRY(opt_num(path, j, "multi.collective_gbps", GBPS, &m->collective_gbps));
    MT_TRY(opt_num(path, j, "multi.nic_gbps", GBPS, &m->nic_gbps));
    static const range BPP = {1, 1024, 0};
    MT_TRY(opt_num(path, j, "host.adamw_bytes_per_param.paper", BPP, &p->adamw_bytes_per_param[MT_ADAMW_PAPER]));
    MT_TRY(opt_num(path, j, "host.adamw_bytes_per_param.mixed", BPP, &p->adamw_bytes_per_param[MT_ADAMW_MIXED]));
    return opt_num(path, j, "host.adamw_bytes_per_param.fp32", BPP, &p->adamw_bytes_per_param[MT_ADAMW_FP32]);
}

// Each link kind's theoretical rate per direction (docs/REFERENCE.md#hardware): no copy
// measured on it can be faster, so a profile that says so was mistyped or mismeasured.
static const struct {
    const char *kind;
    double gbps;
    const char *why;
} link_theory[] = {
    {"pcie-gen3-x16", 15.75, "8 GT/s x 16 lanes x 128/130 encoding"},
    {"pcie-gen4-x16", 31.5, "16 GT/s x 16 lanes x 128/130 encoding"},
    {"pcie-gen5-x16", 63, "32 GT/s x 16 lanes x 128/130 encoding"},
    {"nvlink-c2c", 450, "NVLink-C2C's 900 GB/s total, GH200 datasheet"},
};

// The measured copy rates against the link's theory: the kind's (above) and the
// profile's own link.theory_gbps (a narrower slot than the kind reads lower), the lower.
static mt_status check_link_theory(const char *path, const cJSON *j, const mt_hw_profile *p) {
    double limit = 0;
    char why[160] = "";
    const cJSON *kind = dotted(j, "link.kind");
    for (size_t i = 0; cJSON_IsString(kind) && i < sizeof link_theory / sizeof *link_theory; i++)
        if (!strcmp(kind->valuestring, link_theory[i].kind)) {
            limit = link_theory[i].gbps;
            snprintf(why, sizeof why,
                     "the %s link's theoretical %g GB/s per direction (%s; docs/REFERENCE.md#hardware)",
                     link_theory[i].kind, limit, link_theory[i].why);
        }
    const cJSON *t = dotted(j, "link.theory_gbps");
    if (t && !cJSON_IsNumber(t)) return mt_fail(MT_ERR_FORMAT, "%s: link.theory_gbps: expected a number", path);
    if (t && limit > 0 && t->valuedouble > limit * 1.001)
        return mt_fail(MT_ERR_FORMAT, "%s: link.theory_gbps: %g GB/s exceeds %s; fix link.kind or link.theory_gbps",
                       path, t->valuedouble, why);
    if (t && (limit == 0 || t->valuedouble < limit)) {
        limit = t->valuedouble;
        snprintf(why, sizeof why, "the link's theoretical %g GB/s per direction (link.theory_gbps)", limit);
    }
    if (!(limit > 0)) return MT_OK; // an unknown kind without a theory: nothing to check against
    const struct {
        const char *key;
        double v;
    } rates[] = {{"link.h2d_gbps.pinned", p->h2d_gbps}, {"link.h2d_gbps.pageable", p->h2d_pageable_gbps},
                 {"link.d2h_gbps.pinned", p->d2h_gbps}, {"link.d2h_gbps.pageable", p->d2h_pageable_gbps}};
    for (size_t i = 0; i < sizeof rates / sizeof *rates; i++)
        if (rates[i].v > limit * 1.001) // 0.1%: a theory rounded to the 0.1 GB/s
            return mt_fail(MT_ERR_FORMAT, "%s: %s: %g GB/s exceeds %s: no copy runs faster than its link; measure "
                                          "again (experiments/hardware/README.md) or fix link.kind",
                           path, rates[i].key, rates[i].v, why);
    return MT_OK;
}

static mt_status parse(const char *path, const cJSON *j, mt_hw_profile *p) {
    char schema[64];
    if (!cJSON_IsObject(j)) return mt_fail(MT_ERR_FORMAT, "%s: expected a JSON object", path);
    MT_TRY(str(path, j, "schema", schema, sizeof schema));
    if (strcmp(schema, SCHEMA))
        return mt_fail(MT_ERR_FORMAT, "%s: schema: expected \"%s\", found \"%s\"", path, SCHEMA, schema);
    MT_TRY(str(path, j, "name", p->name, sizeof p->name));
    const cJSON *d = dotted(j, "description");
    if (cJSON_IsString(d)) snprintf(p->description, sizeof p->description, "%s", d->valuestring);
    else if (d) return mt_fail(MT_ERR_FORMAT, "%s: description: expected a string", path);
    MT_TRY(str(path, j, "gpu.name", p->gpu_name, sizeof p->gpu_name));
    MT_TRY(parse_name_match(path, j, p));
    MT_TRY(num(path, j, "gpu.peak_tflops.bf16", TFLOPS, &p->peak_tflops[MT_PEAK_BF16]));
    MT_TRY(num(path, j, "gpu.peak_tflops.tf32", TFLOPS, &p->peak_tflops[MT_PEAK_TF32]));
    MT_TRY(num(path, j, "gpu.peak_tflops.fp32", TFLOPS, &p->peak_tflops[MT_PEAK_FP32]));
    MT_TRY(num(path, j, "gpu.gemm_efficiency", FRACTION, &p->gemm_efficiency));
    MT_TRY(num(path, j, "gpu.hbm_gbps", GBPS, &p->hbm_gbps));
    MT_TRY(num(path, j, "gpu.hbm_bytes", BYTES, &p->hbm_bytes));
    MT_TRY(num(path, j, "link.h2d_gbps.pinned", GBPS, &p->h2d_gbps));
    MT_TRY(num(path, j, "link.h2d_gbps.pageable", GBPS, &p->h2d_pageable_gbps));
    MT_TRY(num(path, j, "link.d2h_gbps.pinned", GBPS, &p->d2h_gbps));
    MT_TRY(num(path, j, "link.d2h_gbps.pageable", GBPS, &p->d2h_pageable_gbps));
    MT_TRY(num(path, j, "link.duplex_factor", FRACTION, &p->duplex_factor));
    MT_TRY(check_link_theory(path, j, p));
    MT_TRY(num(path, j, "host.mem_bytes", BYTES, &p->host_mem_bytes));
    MT_TRY(num(path, j, "host.mem_gbps", GBPS, &p->host_mem_gbps));
    MT_TRY(opt_num(path, j, "host.shared_gbps", GBPS, &p->host_shared_gbps));
    double cores, numa;
    MT_TRY(num(path, j, "host.cpu_cores", CORES, &cores));
    MT_TRY(num(path, j, "host.numa_nodes", NODES, &numa));
    p->cpu_cores = (int)cores;
    p->numa_nodes = (int)numa;
    // what the simulator charges for the optimizer; the planner charges the same
    MT_TRY(num(path, j, "host.adamw_params_per_s.paper", PARAMS_PER_S, &p->adamw_params_per_s[MT_ADAMW_PAPER]));
    MT_TRY(num(path, j, "host.adamw_params_per_s.mixed", PARAMS_PER_S, &p->adamw_params_per_s[MT_ADAMW_MIXED]));
    MT_TRY(num(path, j, "host.adamw_params_per_s.fp32", PARAMS_PER_S, &p->adamw_params_per_s[MT_ADAMW_FP32]));
    if (dotted(j, "host.cpu_optimizers"))
        MT_TRY(str(path, j, "host.cpu_optimizers", p->cpu_optimizers, sizeof p->cpu_optimizers));
    MT_TRY(parse_multi(path, j, p));
    return mt_hw_parse_rates(path, j, p); // the optional measured GPU rates
}

mt_status mt_hw_profile_load(const char *path, mt_hw_profile *out) {
    memset(out, 0, sizeof *out);
    cJSON *j;
    MT_TRY(mt_json_load(path, "the hardware profile", MAX_BYTES, &j));
    mt_status s = parse(path, j, out);
    cJSON_Delete(j);
    if (s == MT_OK) snprintf(out->source, sizeof out->source, "%s", path);
    return s;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *mt_hw_profile_dir(void) {
    static char buf[PATH_MAX + 64];
    const char *env = NULL;
    if (mt_env_text("MT_HARDWARE_DIR", &env) == MT_OK && env) { // a bad value: refused by the CLI
        snprintf(buf, sizeof buf, "%s", env);
        return is_dir(buf) ? buf : NULL;
    }
    if (is_dir("experiments/hardware")) return "experiments/hardware";
    // build/bin/megatrain -> <repo>/experiments/hardware
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *up[] = {"/../../experiments/hardware", "/../experiments/hardware",
                            "/../../../experiments/hardware"};
        for (size_t i = 0; i < sizeof up / sizeof *up; i++) {
            snprintf(buf, sizeof buf, "%s%s", exe, up[i]);
            if (is_dir(buf)) return buf;
        }
    }
#ifdef MT_SOURCE_DIR
    snprintf(buf, sizeof buf, "%s/experiments/hardware", MT_SOURCE_DIR);
    if (is_dir(buf)) return buf;
#endif
    return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void mt_hw_profile_list(char *buf, size_t cap) {
    buf[0] = 0;
    const char *dir = mt_hw_profile_dir();
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return;
    char *names[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 64;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json")) {
            names[n] = strdup(e->d_name);
            if (names[n]) names[n++][len - 5] = 0;
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
        if (w > 0 && (size_t)w < cap - used) used += (size_t)w;
        free(names[i]);
    }
}

mt_status mt_hw_profile_find(const char *spec, char *path, size_t cap) {
    size_t len = strlen(spec);
    if (strchr(spec, '/') || (len > 5 && !strcmp(spec + len - 5, ".json"))) {
        snprintf(path, cap, "%s", spec);
        return MT_OK;
    }
    const char *dir = mt_hw_profile_dir();
    if (!dir)
        return mt_fail(MT_ERR_IO,
                       "--hardware %s: no profile directory found (looked for $MT_HARDWARE_DIR, ./experiments/hardware "
                       "and next to the binary); give a path to the JSON file",
                       spec);
    snprintf(path, cap, "%s/%s.json", dir, spec);
    if (access(path, F_OK) != 0) {
        char names[2048];
        mt_hw_profile_list(names, sizeof names);
        return mt_fail(MT_ERR_ARG, "--hardware %s: unknown profile (available in %s: %s; or a path)",
                       spec, dir, names[0] ? names : "none");
    }
    return MT_OK;
}
