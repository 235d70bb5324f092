// cudnn_graph.h: a small builder over cuDNN's graph ("backend") API, enough to
// write an operation graph as a list of lines:
//   S = cg_virtual(g, "S", CUDNN_DATA_FLOAT, shape);  cg_matmul(g, "bmm1", Q, KT, S, NULL, NULL, NULL);
// Every descriptor made is owned by the graph and destroyed by cg_free. Errors
// are sticky: the first failing call records "op name: cuDNN call: status" in
// g->st / mt_last_error() and every later call does nothing, so a builder
// checks once at the end. Tensors and operations finalize without a GPU (the
// CPU test builds the attention graphs that way); cg_build_plan needs a handle.
#ifndef MT_CUDNN_GRAPH_H
#define MT_CUDNN_GRAPH_H

#include <stdint.h>

#include "backends/cuda/cudnn_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t dim[4], stride[4]; // elements
} cg_shape;

enum { CG_VIRTUAL = 1, CG_BY_VALUE = 2 };

#define CG_MAX_OPS 64

typedef struct {
    const mt_cudnn_api *api;
    cudnnBackendDescriptor_t *all; // every descriptor created (freed by cg_free)
    int n_all, cap_all;
    cudnnBackendDescriptor_t ops[CG_MAX_OPS]; // finalized operations, in graph order
    int n_ops;
    int64_t next_uid; // uids handed to virtual tensors
    mt_status st;     // first failure, MT_OK while none
} cg_graph;

void cg_init(cg_graph *g, const mt_cudnn_api *api, int64_t first_virtual_uid);
void cg_free(cg_graph *g);

// A finalized tensor descriptor (16-byte alignment, as the cuDNN frontend sets).
cudnnBackendDescriptor_t cg_tensor(cg_graph *g, const char *name, int64_t uid, cudnnDataType_t type, cg_shape s,
                                   int flags);
cudnnBackendDescriptor_t cg_virtual(cg_graph *g, const char *name, cudnnDataType_t type, cg_shape s);
// y = mode(x [, b [, t]]) computed in `compute`; axis >= 0 sets CUDNN_ATTR_POINTWISE_AXIS (GEN_INDEX).
void cg_pointwise(cg_graph *g, const char *name, cudnnPointwiseMode_t mode, cudnnDataType_t compute, int64_t axis,
                  cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                  cudnnBackendDescriptor_t y);
// c = a @ b (batched over the leading dims, f32 accumulation); the overrides (NULL: none) are
// per-batch int32 lengths of the M, N, K dimensions.
void cg_matmul(cg_graph *g, const char *name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
               cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t m_override, cudnnBackendDescriptor_t n_override,
               cudnnBackendDescriptor_t k_override);
// y = reduce(x) over the dimensions where y has extent 1 (f32). set_deterministic: write
// CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC = false (what the frontend does from cuDNN 9.11 on).
void cg_reduction(cg_graph *g, const char *name, cudnnReduceTensorOp_t op, int set_deterministic,
                  cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
void cg_reshape(cg_graph *g, const char *name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);

// Operation graph of every op so far, engine heuristics (mode A), then the first engine
// configuration cuDNN finalizes into an execution plan: *plan (owned by g) and its workspace.
mt_status cg_build_plan(cg_graph *g, cudnnHandle_t h, cudnnBackendDescriptor_t *plan, int64_t *workspace_bytes);

#ifdef __cplusplus
}
#endif
#endif
