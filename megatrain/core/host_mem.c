// host_mem.c: see host_mem.h.
#define _GNU_SOURCE
#include "core/host_mem.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <omp.h>

#define PAGE ((size_t)4096)
// Touch work is shared out in 32 MiB pieces (dynamic: a thread that the
// scheduler or a CUDA spin-wait slows takes fewer).
#define TOUCH_PIECE ((size_t)32 << 20)

static int hugepages_asked;

size_t mt_host_mem_rounded(size_t bytes) { return ((bytes ? bytes : 1) + PAGE - 1) / PAGE * PAGE; }

int mt_host_mem_hugepages(void) { return hugepages_asked; }

mt_status mt_host_mem_map(size_t bytes, void **out) {
    size_t n = mt_host_mem_rounded(bytes);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        *out = NULL;
        return mt_fail(MT_ERR_MEMORY, "host memory: cannot map %zu bytes (%.2f GiB): %s", n, n / 1073741824.0,
                       strerror(errno));
    }
#ifdef MADV_HUGEPAGE
    // Advice only: where THP is off or unsupported the block stays in 4 KiB pages.
    hugepages_asked = madvise(p, n, MADV_HUGEPAGE) == 0;
#endif
    *out = p;
    return MT_OK;
}

mt_status mt_host_mem_alloc(size_t bytes, void **out) {
    MT_TRY(mt_host_mem_map(bytes, out));
    size_t n = mt_host_mem_rounded(bytes);
    // First touch: one write per page (the kernel zero-fills it), pieces in parallel.
    long pieces = (long)((n + TOUCH_PIECE - 1) / TOUCH_PIECE);
    char *c = *out;
#pragma omp parallel for schedule(dynamic, 1) if (pieces > 1)
    for (long k = 0; k < pieces; k++) {
        size_t lo = (size_t)k * TOUCH_PIECE, hi = lo + TOUCH_PIECE < n ? lo + TOUCH_PIECE : n;
        for (size_t o = lo; o < hi; o += PAGE) c[o] = 0;
    }
    return MT_OK;
}

void mt_host_mem_free(void *p, size_t bytes) {
    if (p) munmap(p, mt_host_mem_rounded(bytes));
}

