// cpu_blas_reserve.c: OpenBLAS's buffers mapped when the backend is made, before the memory
// check: each of its threads maps a 128 MiB buffer at its first GEMM, and where the map fails
// (ulimit -v, ulimit -d) it retries forever at 100% CPU. Mapped here, under a check that the
// address-space limits hold them, they are in what the memory check sees as used.
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "backends/cpu/cpu_internal.h"
#include "core/mem_limits.h"

mt_status mt_cpu_blas_reserve(void) {
    static int done; // process-wide buffers: once (--gpus N makes N backends, one after another)
    if (done) return MT_OK;
    int blas_threads = openblas_get_num_threads(), omp_threads = omp_get_max_threads();
    // the caller's buffer (each worker mapped its own when the library loaded: cli/blas_fit.c),
    // and the OpenMP threads' stacks and arenas
    size_t need = MT_MEM_BLAS_BUFFER_BYTES + (size_t)(omp_threads - 1) * mt_mem_thread_vm_bytes();
    mt_mem_room r;
    mt_mem_vm_room(0, &r);
    if (r.bytes < need)
        return mt_fail(MT_ERR_MEMORY, "host memory: OpenBLAS (%d threads) and OpenMP (%d) need %.1f MiB more address "
                       "space, but %s leaves %.1f MiB; nothing was allocated. HINT: raise the limit (ulimit -v / -d "
                       "unlimited), or fewer threads (OMP_NUM_THREADS)",
                       blas_threads, omp_threads, need / 1048576.0, r.what, r.bytes / 1048576.0);
    enum { N = 256 }; // large enough that OpenBLAS splits it over every thread
    float *a = calloc(3 * (size_t)N * N, sizeof(float));
    if (!a) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the BLAS warm-up's %d x %d matrices", N, N);
    int started = 0;
#pragma omp parallel
    { // the OpenMP threads start now, inside the check
#pragma omp atomic
        started++;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, a + N * N, N, 0.0f, a + 2 * N * N, N);
    free(a);
    (void)started;
    done = 1;
    return MT_OK;
}
