// measured_profile.c: the planner's view of a --hardware spec: a profile file
// or name (model/hardware_profile.c), or "measured", a profile for this machine
// built from /proc and sysconf with every rate taken from a base profile.
#define _DEFAULT_SOURCE // geteuid under -std=c11

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend/backend_call.h"
#include "backend/backend_registry.h"
#include "core/sysinfo.h"
#include "planner/planner.h"

// The profile's AdamW rates are indexed by mt_precision.
_Static_assert((int)MT_ADAMW_PAPER == (int)MT_PREC_PAPER && (int)MT_ADAMW_MIXED == (int)MT_PREC_MIXED &&
                   (int)MT_ADAMW_FP32 == (int)MT_PREC_FP32,
               "adamw_params_per_s index order");

mt_status mt_hw_profile_resolve(const char *spec, mt_hw_profile *out) {
    if (!strcmp(spec, "measured")) return mt_hw_profile_measured(out);
    char path[PATH_MAX + 128];
    mt_status s = mt_hw_profile_find(spec, path, sizeof path);
    if (s == MT_ERR_ARG) { // an unknown name: say that this machine is a choice too
        char why[2400];
        snprintf(why, sizeof why, "%s", mt_last_error());
        return mt_fail(s, "%s; 'measured' describes this machine", why);
    }
    return s != MT_OK ? s : mt_hw_profile_load(path, out);
}

void mt_this_machine_gpu(char *name, size_t cap, double *mem_bytes) {
    name[0] = 0;
    *mem_bytes = 0;
    // The first backend in the registry with a device of its own that opens here.
    for (int i = 0; i < mt_backend_count(); i++) {
        const mt_backend_entry *e = mt_backend_at(i);
        unsigned want = MT_CAP_DEVICE_MEMORY | MT_CAP_TENSOR_DATA;
        if ((e->caps & want) != want || (e->available && e->available() != 1)) continue;
        mt_backend *be = NULL;
        mt_device_info info;
        mt_backend_args a = {(e->caps & MT_CAP_BF16) ? MT_BF16 : MT_F32, NULL, 0};
        if (e->create(&a, &be) == MT_OK && mt_backend_device_info(be, &info) == MT_OK) {
            snprintf(name, cap, "%s", info.name);
            *mem_bytes = (double)info.mem_total_bytes;
        }
        mt_backend_destroy(be);
        if (name[0]) return;
    }
}

// The profile of the machine whose GPU is named `gpu` ("" when none is visible), by the
// profiles' own gpu.name_match (experiments/hardware/README.md; harness/resultslib/
// profiles.py reads the same key): the first, in name order, with a string found in the
// name, else the first that lists "*". Writes its name; fails when there is none.
static mt_status profile_of_gpu(const char *gpu, char *base, size_t cap) {
    char names[2048], fallback[64] = "";
    mt_hw_profile_list(names, sizeof names);
    base[0] = 0;
    char *save = NULL;
    for (char *n = strtok_r(names, ", ", &save); n && !base[0]; n = strtok_r(NULL, ", ", &save)) {
        mt_hw_profile p;
        if (mt_hw_profile_resolve(n, &p) != MT_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", mt_last_error());
            return mt_fail(MT_ERR_FORMAT, "--hardware measured: profile %s, read for its gpu.name_match: %s", n, why);
        }
        for (int i = 0; i < p.n_gpu_name_match; i++) {
            const char *m = p.gpu_name_match[i];
            if (!strcmp(m, "*")) {
                if (!fallback[0]) snprintf(fallback, sizeof fallback, "%s", n);
            } else if (strstr(gpu, m)) {
                snprintf(base, cap, "%s", n);
            }
        }
    }
    if (!base[0]) snprintf(base, cap, "%s", fallback);
    if (!base[0])
        return mt_fail(MT_ERR_ARG, "--hardware measured: no profile in %s matches GPU '%s' and none lists \"*\" in "
                       "gpu.name_match, to take the rates from", mt_hw_profile_dir() ? mt_hw_profile_dir() : "(none)",
                       gpu);
    return MT_OK;
}

mt_status mt_hw_profile_measured(mt_hw_profile *out) {
    double total = (double)mt_host_mem_total_bytes();
    if (!(total > 0)) return mt_fail(MT_ERR_IO, "--hardware measured: cannot read MemTotal from /proc/meminfo");
    // The GPU, when a CUDA device is visible: its name and memory are facts.
    char gpu[128];
    double gpu_bytes;
    mt_this_machine_gpu(gpu, sizeof gpu, &gpu_bytes);
    char base[64];
    MT_TRY(profile_of_gpu(gpu, base, sizeof base));
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
