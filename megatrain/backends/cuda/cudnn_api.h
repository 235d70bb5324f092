// cudnn_api.h: the cuDNN entry points megatrain calls, loaded at run time.
//
// Why dlopen and not a link: cuDNN 9 is ~470 MB and not part of every CUDA
// install. The GPU machine has it only inside PyTorch's wheel
// (nvidia-cudnn-cu13, .../site-packages/nvidia/cudnn/lib), CI and the dev box
// have it in the toolkit. Linking would make the binary refuse to start where
// libcudnn.so.9 is absent; loading it on first use keeps one binary that runs
// everywhere and takes cuDNN's attention only where the library is found (the
// loader's usual search: LD_LIBRARY_PATH, ld.so.cache, ...; or the exact file
// named by MT_CUDNN_LIBRARY). Only the graph ("backend") API is used: plain C,
// declared by cudnn_graph.h, which ships with the toolkit's cuDNN headers.
#ifndef MT_CUDNN_API_H
#define MT_CUDNN_API_H

#include <cudnn_graph.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/status.h"

typedef struct {
    size_t version;   // cudnnGetVersion() of the loaded library, e.g. 91900
    char path[512];   // the file dlopen resolved
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(cudnnStatus_t);
    void (*GetLastErrorString)(char *message, size_t max_size);
    cudnnStatus_t (*Create)(cudnnHandle_t *);
    cudnnStatus_t (*Destroy)(cudnnHandle_t);
    cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*BackendCreateDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*BackendDestroyDescriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendSetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*BackendGetAttribute)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*BackendFinalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendExecute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} mt_cudnn_api;

// The loaded library (once per process, thread-safe), or NULL with the reason
// in mt_last_error() (library not found, a symbol missing, a cuDNN older than 9).
const mt_cudnn_api *mt_cudnn_api_load(void);

// MT_ERR_BACKEND with "file:line: what: CUDNN_STATUS_... (cuDNN's last error). HINT".
mt_status mt_cudnn_fail(const mt_cudnn_api *api, cudnnStatus_t st, const char *what, const char *file, int line);

// Evaluates a cudnnStatus_t expression; on failure returns the mt_status from the enclosing function.
#define MT_CUDNN_CHECK(api, stmt)                                                                \
    do {                                                                                         \
        cudnnStatus_t mt_cudnn_st_ = (stmt);                                                     \
        if (mt_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                                \
            return mt_cudnn_fail((api), mt_cudnn_st_, #stmt, __FILE__, __LINE__);                \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
