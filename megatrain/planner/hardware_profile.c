// hardware_profile.c: reading and validating experiments/hardware/NAME.json
// (schema megatrain.hardware/1, keys in experiments/hardware/README.md), and
// building a "measured" profile from this machine.
#define _DEFAULT_SOURCE // readlink, realpath under -std=c11

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "planner/planner.h"

#define SCHEMA "megatrain.hardware/1"

static const cJSON *dotted(const cJSON *root, const char *key) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", key);
    const cJSON *o = root;
    for (char *tok = strtok(buf, "."); tok && o; tok = strtok(NULL, "."))
        o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, tok) : NULL;
    return o;
}

// A positive number at dotted key `key`; `max` > 0 bounds it (fractions).
static mt_status num(const char *path, const cJSON *root, const char *key, double max, double *out) {
    const cJSON *v = dotted(root, key);
    if (!v) return mt_fail(MT_ERR_FORMAT, "%s: %s: required number is missing", path, key);
    if (!cJSON_IsNumber(v)) return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a number", path, key);
    double d = v->valuedouble;
    if (!(d > 0)) return mt_fail(MT_ERR_FORMAT, "%s: %s: must be positive (got %g)", path, key, d);
    if (max > 0 && d > max) return mt_fail(MT_ERR_FORMAT, "%s: %s: must be at most %g (got %g)", path, key, max, d);
    *out = d;
    return MT_OK;
}

static mt_status str(const char *path, const cJSON *root, const char *key, char *out, size_t cap) {
    const cJSON *v = dotted(root, key);
    if (!v) return mt_fail(MT_ERR_FORMAT, "%s: %s: required string is missing", path, key);
    if (!cJSON_IsString(v)) return mt_fail(MT_ERR_FORMAT, "%s: %s: expected a string", path, key);
    snprintf(out, cap, "%s", v->valuestring);
    return MT_OK;
}

static mt_status parse(const char *path, const cJSON *j, mt_hw_profile *p) {
    char schema[64];
    if (!cJSON_IsObject(j)) return mt_fail(MT_ERR_FORMAT, "%s: expected a JSON object", path);
    MT_TRY(str(path, j, "schema", schema, sizeof schema));
    if (strcmp(schema, SCHEMA))
        return mt_fail(MT_ERR_FORMAT, "%s: schema: expected \"%s\", found \"%s\"", path, SCHEMA, schema);
    MT_TRY(str(path, j, "name", p->name, sizeof p->name));
    if (dotted(j, "description")) MT_TRY(str(path, j, "description", p->description, sizeof p->description));
    MT_TRY(str(path, j, "gpu.name", p->gpu_name, sizeof p->gpu_name));
    MT_TRY(num(path, j, "gpu.peak_tflops.bf16", 0, &p->peak_tflops[MT_PEAK_BF16]));
    MT_TRY(num(path, j, "gpu.peak_tflops.tf32", 0, &p->peak_tflops[MT_PEAK_TF32]));
    MT_TRY(num(path, j, "gpu.peak_tflops.fp32", 0, &p->peak_tflops[MT_PEAK_FP32]));
    MT_TRY(num(path, j, "gpu.gemm_efficiency", 1.0, &p->gemm_efficiency));
    MT_TRY(num(path, j, "gpu.hbm_gbps", 0, &p->hbm_gbps));
    MT_TRY(num(path, j, "gpu.hbm_bytes", 0, &p->hbm_bytes));
    MT_TRY(num(path, j, "link.h2d_gbps.pinned", 0, &p->h2d_gbps));
    MT_TRY(num(path, j, "link.h2d_gbps.pageable", 0, &p->h2d_pageable_gbps));
    MT_TRY(num(path, j, "link.d2h_gbps.pinned", 0, &p->d2h_gbps));
    MT_TRY(num(path, j, "link.d2h_gbps.pageable", 0, &p->d2h_pageable_gbps));
    MT_TRY(num(path, j, "link.duplex_factor", 1.0, &p->duplex_factor));
    MT_TRY(num(path, j, "host.mem_bytes", 0, &p->host_mem_bytes));
    MT_TRY(num(path, j, "host.mem_gbps", 0, &p->host_mem_gbps));
    double cores, numa;
    MT_TRY(num(path, j, "host.cpu_cores", 0, &cores));
    MT_TRY(num(path, j, "host.numa_nodes", 0, &numa));
    p->cpu_cores = (int)cores;
    p->numa_nodes = (int)numa;
    // adamw_params_per_s is what the simulator charges; the planner charges the same.
    MT_TRY(num(path, j, "host.adamw_params_per_s.paper", 0, &p->adamw_params_per_s[MT_PREC_PAPER]));
    MT_TRY(num(path, j, "host.adamw_params_per_s.mixed", 0, &p->adamw_params_per_s[MT_PREC_MIXED]));
    MT_TRY(num(path, j, "host.adamw_params_per_s.fp32", 0, &p->adamw_params_per_s[MT_PREC_FP32]));
    return MT_OK;
}

mt_status mt_hw_profile_load(const char *path, mt_hw_profile *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return mt_fail(MT_ERR_IO, "--hardware %s: cannot open: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            if (cap > (16u << 20)) {
                free(text);
                fclose(f);
                return mt_fail(MT_ERR_FORMAT, "%s: larger than 16 MiB, not a hardware profile", path);
            }
            char *t = realloc(text, cap);
            if (!t) {
                free(text);
                fclose(f);
                return mt_fail(MT_ERR_MEMORY, "%s: cannot allocate a read buffer", path);
            }
            text = t;
        }
        size_t n = fread(text + len, 1, 4096, f);
        len += n;
        if (n < 4096) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(text);
        return mt_fail(MT_ERR_IO, "%s: read error", path);
    }
    text[len] = 0;
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= text && at <= text + len ? (long)(at - text) : -1;
        free(text);
        return mt_fail(MT_ERR_FORMAT, "%s: malformed JSON near byte %ld", path, off);
    }
    free(text);
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
    const char *env = getenv("MT_HARDWARE_DIR");
    if (env && *env) {
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
        const char *up[] = {"/../../experiments/hardware", "/../experiments/hardware", "/../../../experiments/hardware"};
        for (size_t i = 0; i < sizeof up / sizeof *up; i++) {
            snprintf(buf, sizeof buf, "%s%s", exe, up[i]);
            if (is_dir(buf)) return buf;
        }
    }
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

mt_status mt_hw_profile_resolve(const char *spec, mt_hw_profile *out) {
    if (!strcmp(spec, "measured")) return mt_hw_profile_measured(out);
    size_t len = strlen(spec);
    if (strchr(spec, '/') || (len > 5 && !strcmp(spec + len - 5, ".json"))) return mt_hw_profile_load(spec, out);
    const char *dir = mt_hw_profile_dir();
    if (!dir)
        return mt_fail(MT_ERR_IO,
                       "--hardware %s: no profile directory found (looked for $MT_HARDWARE_DIR, ./experiments/hardware "
                       "and next to the binary); give a path to the JSON file",
                       spec);
    char path[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s.json", dir, spec);
    if (access(path, F_OK) != 0) {
        char names[2048];
        mt_hw_profile_list(names, sizeof names);
        return mt_fail(MT_ERR_ARG, "--hardware %s: unknown profile (available in %s: %s; or 'measured', or a path)",
                       spec, dir, names[0] ? names : "none");
    }
    return mt_hw_profile_load(path, out);
}

static double meminfo_bytes(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256], fmt[64];
    snprintf(fmt, sizeof fmt, "%s: %%lf kB", key);
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, fmt, &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

mt_status mt_hw_profile_measured(mt_hw_profile *out) {
    double total = meminfo_bytes("MemTotal");
    if (!(total > 0)) return mt_fail(MT_ERR_IO, "--hardware measured: cannot read MemTotal from /proc/meminfo");
    // The GPU, when a CUDA device is visible: its name and memory are facts.
    char gpu[128] = "";
    double gpu_bytes = 0;
#ifdef MT_HAVE_CUDA
    if (mt_backend_cuda_available() == 1) {
        mt_backend *be = NULL;
        mt_device_info info;
        if (mt_backend_create("cuda", MT_BF16, &be) == MT_OK && be->ops->device_info(be, &info) == MT_OK) {
            snprintf(gpu, sizeof gpu, "%s", info.name);
            gpu_bytes = (double)info.mem_total_bytes;
        }
        mt_backend_destroy(be);
    }
#endif
    const char *base = strstr(gpu, "H200") ? "h200-128g" : "h100-128g";
    mt_status s = mt_hw_profile_resolve(base, out);
    if (s != MT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", mt_last_error());
        return mt_fail(s, "--hardware measured: the assumed rates come from profile %s, which failed: %s", base, why);
    }
    out->measured = 1;
    snprintf(out->name, sizeof out->name, "measured");
    snprintf(out->source, sizeof out->source, "measured");
    snprintf(out->description, sizeof out->description, "this machine (memory measured, rates assumed from %s)", base);
    out->host_mem_bytes = total;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0) out->cpu_cores = (int)cores;
    struct rlimit rl; // root has CAP_IPC_LOCK and is not bound by the limit
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && geteuid() != 0)
        out->pinned_limit_bytes = (double)rl.rlim_cur;
    if (gpu_bytes > 0) {
        snprintf(out->gpu_name, sizeof out->gpu_name, "%s", gpu);
        out->hbm_bytes = gpu_bytes;
    } else {
        char assumed[sizeof out->gpu_name + 16];
        snprintf(assumed, sizeof assumed, "assumed: %s", out->gpu_name);
        snprintf(out->gpu_name, sizeof out->gpu_name, "%.*s", (int)sizeof out->gpu_name - 1, assumed);
    }
    snprintf(out->measured_note, sizeof out->measured_note,
             "measured: host.mem_bytes (/proc/meminfo MemTotal), host.cpu_cores (sysconf), the lock limit (ulimit -l)%s; assumed: every rate "
             "(peak TFLOP/s, GEMM efficiency, link GB/s, duplex, AdamW rate)%s taken from profile %s, not measured "
             "(run mt-microbench and write a profile to replace them)",
             gpu_bytes > 0 ? ", gpu.name and gpu.hbm_bytes (CUDA device_info)" : "",
             gpu_bytes > 0 ? "" : " and the GPU (none visible: gpu.name, gpu.hbm_bytes)", base);
    return MT_OK;
}
