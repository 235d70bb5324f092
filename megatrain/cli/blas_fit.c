// blas_fit.c: OpenBLAS fitted to the address-space limits before it can spin. Its worker
// threads start when the library loads, each maps a 128 MiB buffer, and one whose map fails
// (ulimit -v, ulimit -d) retries forever at 100% CPU, and exit then waits on it forever.
// Where the limit cannot hold every worker's buffer, the process starts again (execv,
// which ends the workers) with OPENBLAS_NUM_THREADS set to what fits, and says so.
#define _GNU_SOURCE
#include "cli/blas_fit.h"

#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/mem_limits.h"

// Address space a run needs beside OpenBLAS's buffers (libraries, engine threads'
// stacks and arenas, a small model): what the memory check refuses past is its own business.
#define MT_BLAS_FIT_FLOOR_BYTES ((size_t)512 << 20)

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

void mt_blas_fit_limits(char **argv) {
    size_t lim = vm_limit_bytes();
    const char *set = getenv("OPENBLAS_NUM_THREADS");
    if (lim == SIZE_MAX || (set && *set)) return; // no limit, or the user's (or our second start's) choice
    int have = openblas_get_num_threads();
    // the caller's buffer and each worker's: `have` buffers in all
    size_t room = lim > MT_BLAS_FIT_FLOOR_BYTES ? lim - MT_BLAS_FIT_FLOOR_BYTES : 0;
    size_t fit = room / MT_MEM_BLAS_BUFFER_BYTES;
    if (fit >= (size_t)have) return;
    int want = fit < 1 ? 1 : (int)fit;
    char n[16];
    snprintf(n, sizeof n, "%d", want);
    fprintf(stderr, "megatrain: the address-space limit (ulimit -v or -d) of %.0f MiB holds %d of OpenBLAS's %d "
            "threads' 128 MiB buffers: running with OPENBLAS_NUM_THREADS=%d\n", lim / 1048576.0, want, have, want);
    setenv("OPENBLAS_NUM_THREADS", n, 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "megatrain: error: cannot start again with OPENBLAS_NUM_THREADS=%d (execv failed). HINT: set "
            "OPENBLAS_NUM_THREADS=%d yourself, or raise ulimit -v\n", want, want);
    _exit(1);
}
