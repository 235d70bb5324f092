// collective.c: which collective a run of N ranks uses, from the backends' capabilities.
#include "engine/collective.h"

mt_status mt_collective_create(mt_backend **bes, int n_ranks, int n_units, mt_collective **out) {
    *out = NULL;
    // Device memory that is host memory (cpu): the host sums the ranks' copies, in rank order.
    if (!mt_backend_has(bes[0], MT_CAP_DEVICE_MEMORY)) return mt_collective_host_create(n_ranks, n_units, out);
#ifdef MT_HAVE_NCCL
    mt_status s = mt_collective_nccl_create(bes, n_ranks, n_units, out);
    if (s != MT_OK) {
        mt_collective_destroy(*out); // what was made (communicators included)
        *out = NULL;
    }
    return s;
#else
    return mt_fail(MT_ERR_UNSUPPORTED,
                   "--gpus %d on --backend %s: needs NCCL to reduce the gradients across the GPUs, and this binary "
                   "was built without it. HINT: install NCCL (nccl.h, libnccl.so) and rebuild, or run --gpus 1",
                   n_ranks, bes[0]->ops->name);
#endif
}

void mt_collective_destroy(mt_collective *c) {
    if (c) c->destroy(c);
}
