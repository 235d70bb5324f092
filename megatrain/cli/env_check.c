// env_check.c: every environment variable megatrain reads, each through core/env.h,
// checked before any command runs, so a value it cannot read stops it at once (exit 2)
// rather than deep inside a run, or never (a backend that reads it is not this build's).
#include "cli/env_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/env.h"
#include "engine/hosts.h"
#include "optim/simd.h"

// MT_FAULT_KILL_AT / MT_FAULT_TERM_AT=POINT[:N] (checkpoint/ckpt_dir.c's test hooks): a save point and a count >= 1.
static mt_status check_kill_at(const char *name) {
    static const char *const points[] = {"staged", "exchanged", "moved-aside", "proved-aside"};
    const char *v;
    MT_TRY(mt_env_text(name, &v));
    if (!v) return MT_OK;
    size_t n = strcspn(v, ":");
    int known = 0;
    for (int i = 0; i < 4; i++) known |= strlen(points[i]) == n && !strncmp(v, points[i], n);
    const char *count = v[n] ? v + n + 1 : "1";
    size_t digits = strspn(count, "0123456789");
    if (!known || !digits || count[digits] || digits > 9 || strspn(count, "0") == digits)
        return mt_fail(MT_ERR_ARG, "%s=%.80s: expected staged, exchanged, moved-aside or proved-aside, then :N (N >= "
                                   "1) if not the first. HINT: unset it",
                       name, v);
    return MT_OK;
}

// OMP_NUM_THREADS (libgomp: one count, or a comma list for nested levels), OPENBLAS_NUM_THREADS
// and GOTO_NUM_THREADS (OpenBLAS): read by the libraries, which set their thread counts by them
// and take garbage silently as "every core"; so they are read as strictly as ours.
static mt_status check_thread_count(const char *name, int list) {
    const char *v;
    MT_TRY(mt_env_text(name, &v));
    if (!v) return MT_OK;
    for (const char *p = v;; p++) {
        size_t digits = strspn(p, "0123456789");
        int ok = digits > 0 && digits <= 7 && *p != '0' && strtol(p, NULL, 10) <= (1 << 20);
        p += digits;
        if (!ok || (*p && (*p != ',' || !list)))
            return mt_fail(MT_ERR_ARG, "%s=%.80s: expected a thread count in 1..1048576%s. HINT: unset it for every "
                                       "core",
                           name, v, list ? " (or a comma list of them, one a nesting level)" : "");
        if (!*p) return MT_OK;
    }
}

mt_status mt_env_check_all(void) {
    uint64_t u;
    int b, i, hosts;
    const char *t;
    mt_simd_isa isa;
    MT_TRY(mt_simd_from_env(&isa));
    MT_TRY(mt_env_text("MT_HARDWARE_DIR", &t));
    struct stat st;
    if (t && (stat(t, &st) || !S_ISDIR(st.st_mode)))
        return mt_fail(MT_ERR_ARG, "MT_HARDWARE_DIR=%.200s: not a directory. HINT: unset it for experiments/hardware", t);
    MT_TRY(mt_env_text("MT_SIM_VALIDATION", &t)); // a missing file: its loader's error (planner/sim_band.c)
    MT_TRY(mt_env_text("MT_CPU_OPTIMIZERS", &t)); // a missing file: no measurements (tests use it so)
    MT_TRY(mt_env_u64("MT_HOST_MEM_LIMIT", 1, UINT64_MAX, 0, &u));
    MT_TRY(check_thread_count("OMP_NUM_THREADS", 1));
    MT_TRY(check_thread_count("OPENBLAS_NUM_THREADS", 0));
    MT_TRY(check_thread_count("GOTO_NUM_THREADS", 0));
    MT_TRY(mt_hosts_size_from_env(&hosts));
    MT_TRY(mt_env_u64("MT_HOSTS_CHUNK_BYTES", 64, (uint64_t)1 << 30, 0, &u)); // engine/hosts_mpi.c's rounds
    MT_TRY(mt_env_bool("MT_HOSTS_ONE_THREAD", 0, &b));
    MT_TRY(check_kill_at("MT_FAULT_KILL_AT"));
    MT_TRY(check_kill_at("MT_FAULT_TERM_AT"));
    MT_TRY(mt_env_bool("MT_FAULT_NO_EXCHANGE", 0, &b));
    MT_TRY(mt_env_bool("MT_FAULT_NO_SPACE_CHECK", 0, &b));
    MT_TRY(mt_env_u64("MT_FAULT_READ_PAUSE_MS", 0, 600000, 0, &u));
    // Read by the cuda backend (backends/cuda/), checked in every build.
    static const char *const pin[] = {"register", "alloc"}, *const sync[] = {"block", "spin", "yield", "auto"};
    MT_TRY(mt_env_text("MT_CUDNN_LIBRARY", &t));
    MT_TRY(mt_env_text("MT_NCCL_LIBRARY", &t));
    MT_TRY(mt_env_bool("MT_CUDNN_DETERMINISTIC", 0, &b));
    MT_TRY(mt_env_bool("MT_ATTN_SIMPLE", 0, &b));
    MT_TRY(mt_env_bool("MT_GEMM_FALLBACK", 0, &b));
    MT_TRY(mt_env_choice("MT_PIN", pin, 2, 0, &i));
    MT_TRY(mt_env_choice("MT_CUDA_SYNC", sync, 4, 0, &i));
    MT_TRY(mt_env_u64("MT_CUDA_DEVICE", 0, 4095, 0, &u));
    return MT_OK;
}
