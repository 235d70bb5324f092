// blas_fit.c: OpenBLAS fitted to the address-space limits before it can spin. Its worker
// threads start when the library loads, each maps a 128 MiB buffer, and one whose map fails
// (ulimit -v, ulimit -d) retries forever at 100% CPU, and exit then waits on it forever.
// Where the limit cannot hold every worker's buffer, the process starts again (execv,
// which ends the workers) with OPENBLAS_NUM_THREADS set to what fits, and says so at the end.
#define _GNU_SOURCE
#include "cli/blas_fit.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/env.h"
#include "core/mem_limits.h"

// Address space a run needs beside what is mapped at start (the libraries: 44 MiB on the CPU
// build, about 840 MiB with cuBLAS) and OpenBLAS's buffers: engine threads' stacks and arenas,
// a small model. What the memory check refuses past that is its own business.
#define MT_BLAS_FIT_MARGIN_BYTES ((size_t)448 << 20)

static size_t vm_limit_bytes(void) {
    size_t lim = SIZE_MAX;
    const int res[] = {RLIMIT_AS, RLIMIT_DATA};
    for (int i = 0; i < 2; i++) {
        struct rlimit rl;
        if (getrlimit(res[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (size_t)rl.rlim_cur < lim)
            lim = (size_t)rl.rlim_cur;
    }
    return lim;
}

int mt_blas_vm_limited(void) { return vm_limit_bytes() != SIZE_MAX; }

static int fitted_from; // the second start: the threads OpenBLAS had before it was fitted

void mt_blas_fit_note(int rc) {
    if (fitted_from && (rc == 0 || rc == 130)) // a refusal says the limit itself, in its one line
        fprintf(stderr, "megatrain: ran with OPENBLAS_NUM_THREADS=%d, not %d: the address-space limit (ulimit -v or "
                "-d) holds no more of its threads' 128 MiB buffers\n", openblas_get_num_threads(), fitted_from);
}

mt_status mt_blas_fit_limits(char **argv) {
    // Set by the first start (the thread count it had); a value it could not have set is
    // refused, not read as "not fitted" (set empty: env.h's default would hide it).
    const char *v = getenv("MT_BLAS_FITTED");
    if (v && !*v)
        return mt_fail(MT_ERR_ARG, "MT_BLAS_FITTED= (set empty): expected a whole number in 1..1048576 (the "
                                   "OpenBLAS thread count megatrain's first start had). HINT: unset it");
    uint64_t from = 0;
    MT_TRY(mt_env_u64("MT_BLAS_FITTED", 1, 1 << 20, 0, &from));
    fitted_from = (int)from;
    unsetenv("MT_BLAS_FITTED");
    size_t lim = vm_limit_bytes();
    const char *set = getenv("OPENBLAS_NUM_THREADS");
    if (lim == SIZE_MAX || (set && *set)) return MT_OK; // no limit, or the user's (or our second start's) choice
    int have = openblas_get_num_threads();
    // the caller's buffer and each worker's: `have` buffers in all, beside what is mapped now
    // (a worker's buffer already mapped counts twice: at worst one thread fewer than would fit)
    mt_mem_room now;
    mt_mem_vm_room(0, &now);
    size_t room = now.bytes > MT_BLAS_FIT_MARGIN_BYTES ? now.bytes - MT_BLAS_FIT_MARGIN_BYTES : 0;
    size_t fit = room / MT_MEM_BLAS_BUFFER_BYTES;
    if (fit >= (size_t)have) return MT_OK;
    int want = fit < 1 ? 1 : (int)fit;
    char n[16], h[16];
    snprintf(n, sizeof n, "%d", want);
    snprintf(h, sizeof h, "%d", have);
    setenv("OPENBLAS_NUM_THREADS", n, 1);
    setenv("MT_BLAS_FITTED", h, 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "megatrain: error: cannot start again with OPENBLAS_NUM_THREADS=%d (execv failed). HINT: set "
            "OPENBLAS_NUM_THREADS=%d yourself, or raise ulimit -v\n", want, want);
    _exit(1);
}
