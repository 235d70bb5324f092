// cuda.h: what only the cuda backend offers (backends/cuda/cuda_backend.cu); C linkage.
#ifndef MT_CUDA_H
#define MT_CUDA_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif
mt_status mt_backend_cuda_create(mt_dtype act_dtype, mt_backend **out);
// On CUDA device `device` (0: MT_CUDA_DEVICE's, else 0), for a rank of --gpus N.
mt_status mt_backend_cuda_create_on(mt_dtype act_dtype, int device, mt_backend **out);
int mt_backend_cuda_available(void); // 1 when a CUDA device can be opened
unsigned mt_backend_cuda_caps(void); // its ops table's caps
mt_status mt_backend_cuda_set_attention(mt_backend *be, mt_attn_impl impl); // see mt_backend_set_attention
#ifdef __cplusplus
}
#endif

#endif
