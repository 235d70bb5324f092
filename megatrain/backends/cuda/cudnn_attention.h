// cudnn_attention.h: causal GQA attention, forward and backward, through
// cuDNN's fused flash attention (FlashAttention-2 style kernels; Hopper ones
// use wgmma and TMA), on our packed layout with no copies:
//   qkv (B,T,(NH+2*NKV)*HD) bf16 -> out (B,T,NH*HD) bf16, lse (B,NH,T) f32;
//   backward: dqkv from dout, qkv, out, lse. Scale 1/sqrt(HD).
// cuDNN's softmax statistics are exactly our lse (natural-log logsumexp of the
// scaled, masked scores), so either implementation's forward feeds the other's
// backward. One execution plan per (direction, B, T, NH, NKV, HD), built on
// first use and cached; one workspace, grown to the largest plan's need.
#ifndef MT_CUDNN_ATTENTION_H
#define MT_CUDNN_ATTENTION_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/status.h"

typedef struct mt_cudnn_attn mt_cudnn_attn;

// Loads cuDNN (cudnn_api.h) and creates a handle on the current device bound to
// `stream`. MT_ERR_UNSUPPORTED when the library does not load (mt_last_error says why).
mt_status mt_cudnn_attn_create(cudaStream_t stream, mt_cudnn_attn **out);
void mt_cudnn_attn_destroy(mt_cudnn_attn *a);
// "cuDNN 9.19.0 (/path/libcudnn.so.9)"
const char *mt_cudnn_attn_describe(const mt_cudnn_attn *a);

// NULL when cuDNN's fused attention can take these arguments, else why not (bf16
// activations, head dim a multiple of 8 up to 128, 16-byte aligned buffers).
const char *mt_cudnn_attn_unsupported(int act_is_bf16, int HD, const void *const *ptrs, int n_ptrs);

mt_status mt_cudnn_attn_fwd(mt_cudnn_attn *a, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                            int HD);
mt_status mt_cudnn_attn_bwd(mt_cudnn_attn *a, void *dqkv, const void *dout, const void *qkv, const void *out,
                            const float *lse, int B, int T, int NH, int NKV, int HD);

// Test hook (needs libcudnn, no GPU): builds and finalizes the tensors and operations
// of the graph a cuDNN of `version` (e.g. 91500) would be given, without a plan.
// *n_ops: the operation count. deterministic: the backward without the f32 dQ accumulator.
mt_status mt_cudnn_attn_graph_check(int bwd, int B, int T, int NH, int NKV, int HD, int deterministic, size_t version,
                                    int *n_ops);

#ifdef __cplusplus
}
#endif
#endif
