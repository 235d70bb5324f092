// blas_fit.h: OpenBLAS's threads fitted to ulimit -v / -d before they can spin (blas_fit.c).
#ifndef MT_BLAS_FIT_H
#define MT_BLAS_FIT_H

#include "core/status.h"

// Under an address-space limit too small for every OpenBLAS thread's buffer, with
// OPENBLAS_NUM_THREADS unset: starts this process again with the count that fits. Returns otherwise:
// MT_ERR_ARG where MT_BLAS_FITTED (the first start's count, for the note) is not a count.
mt_status mt_blas_fit_limits(char **argv);
// After the run (exit status rc): a note on stderr when OpenBLAS was fitted, unless a refusal said why.
void mt_blas_fit_note(int rc);
// 1 when ulimit -v or -d is set (an OpenBLAS worker may be spinning: exit must not wait on it).
int mt_blas_vm_limited(void);

#endif
