// cuda_check.h: MT_CUDA_CHECK(stmt), one check macro generic over cudaError_t and
// cublasStatus_t (C++ overloads pick the right decoder). On failure it records
// "file:line: stmt: error" with a HINT in mt_last_error() and returns MT_ERR_BACKEND
// (MT_ERR_MEMORY for out-of-memory) from the enclosing function.
#ifndef MT_CUDA_CHECK_H
#define MT_CUDA_CHECK_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "core/status.h"
}

static inline mt_status mt_cuda_check_impl(cudaError_t e, const char *stmt, const char *file, int line) {
    if (e == cudaSuccess) return MT_OK;
    const char *hint = e == cudaErrorMemoryAllocation ? "HINT: reduce --batch/--seq-len or raise --checkpoint-interval"
                       : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver
                           ? "HINT: no usable CUDA device/driver; use --backend cpu"
                           : "HINT: rerun under compute-sanitizer for the failing kernel";
    return mt_fail(e == cudaErrorMemoryAllocation ? MT_ERR_MEMORY : MT_ERR_BACKEND, "%s:%d: %s: %s (%s). %s", file, line,
                   stmt, cudaGetErrorString(e), cudaGetErrorName(e), hint);
}

static inline mt_status mt_cuda_check_impl(cublasStatus_t e, const char *stmt, const char *file, int line) {
    if (e == CUBLAS_STATUS_SUCCESS) return MT_OK;
    return mt_fail(e == CUBLAS_STATUS_ALLOC_FAILED ? MT_ERR_MEMORY : MT_ERR_BACKEND, "%s:%d: %s: cuBLAS %s (%d). %s", file,
                   line, stmt, cublasGetStatusString(e), (int)e,
                   "HINT: unsupported shape/alignment/dtype combination or out of device memory");
}

#define MT_CUDA_CHECK(stmt)                                                           \
    do {                                                                              \
        mt_status mt_ck_s_ = mt_cuda_check_impl((stmt), #stmt, __FILE__, __LINE__);   \
        if (mt_ck_s_ != MT_OK) return mt_ck_s_;                                       \
    } while (0)

// After a kernel launch: catches bad launch configurations (not async faults).
#define MT_CUDA_CHECK_LAUNCH() MT_CUDA_CHECK(cudaGetLastError())

#endif
