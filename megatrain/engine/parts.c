// parts.c: the device-memory tally every part allocates through, and the check that a
// part allocated what it planned (parts.h). Apart from footprint.c, which only adds up the
// parts' bytes: the parts call these, footprint.c calls the parts.
#include <stdlib.h>

#include "backend/backend_call.h"
#include "engine/parts.h"

mt_status mt_devmem_alloc(mt_devmem *dm, size_t bytes, void **out) {
    if (dm->n == dm->cap) {
        int cap = dm->cap ? 2 * dm->cap : 64;
        void **p = realloc(dm->ptrs, sizeof *p * (size_t)cap);
        if (!p) return mt_fail(MT_ERR_MEMORY, "host memory: the device allocation table");
        dm->ptrs = p;
        dm->cap = cap;
    }
    size_t rounded = mt_dev_round(bytes);
    MT_TRY(mt_backend_dev_alloc(dm->be, rounded, out));
    dm->ptrs[dm->n++] = *out;
    dm->bytes += rounded;
    return MT_OK;
}

void mt_devmem_free_all(mt_devmem *dm) {
    for (int i = 0; i < dm->n; i++) mt_backend_dev_free(dm->be, dm->ptrs[i]);
    free(dm->ptrs);
    dm->ptrs = NULL;
    dm->n = dm->cap = 0;
    dm->bytes = 0;
}

mt_status mt_part_check(const char *part, size_t planned, size_t allocated) {
    if (planned == allocated) return MT_OK;
    return mt_fail(MT_ERR_BACKEND, "internal: the %s allocated %zu device bytes but its plan says %zu", part, allocated,
                   planned);
}
