// cudnn_graph.c: the builder of cudnn_graph.h. The attributes each descriptor
// gets are the ones the cuDNN frontend (NVIDIA/cudnn-frontend) sets for the same
// node, so the engines recognize the graphs it would have produced.
#include "backends/cuda/cudnn_graph.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cg_init(cg_graph *g, const mt_cudnn_api *api, int64_t first_virtual_uid) {
    memset(g, 0, sizeof *g);
    g->api = api;
    g->next_uid = first_virtual_uid;
    g->st = MT_OK;
}

void cg_free(cg_graph *g) {
    if (g->api)
        for (int i = g->n_all - 1; i >= 0; i--) g->api->BackendDestroyDescriptor(g->all[i]);
    free(g->all);
    g->all = NULL;
    g->n_all = g->cap_all = 0;
    g->n_ops = 0;
}

// Records the first failure as "name: call" and returns 0; 1 while all is well.
static int ok_(cg_graph *g, cudnnStatus_t st, const char *name, const char *call, int line) {
    if (st == CUDNN_STATUS_SUCCESS) return 1;
    if (g->st == MT_OK) {
        char what[256];
        snprintf(what, sizeof what, "%s: %s", name, call);
        g->st = mt_cudnn_fail(g->api, st, what, __FILE__, line);
    }
    return 0;
}
#define OK(name, stmt) ok_(g, (stmt), (name), #stmt, __LINE__)

static cudnnBackendDescriptor_t make(cg_graph *g, const char *name, cudnnBackendDescriptorType_t type) {
    if (g->st != MT_OK) return NULL;
    if (g->n_all == g->cap_all) {
        int cap = g->cap_all ? 2 * g->cap_all : 64;
        cudnnBackendDescriptor_t *p = (cudnnBackendDescriptor_t *)realloc(g->all, (size_t)cap * sizeof *p);
        if (!p) {
            g->st = mt_fail(MT_ERR_MEMORY, "cuDNN graph %s: out of host memory", name);
            return NULL;
        }
        g->all = p;
        g->cap_all = cap;
    }
    cudnnBackendDescriptor_t d = NULL;
    if (!OK(name, g->api->BackendCreateDescriptor(type, &d))) return NULL;
    g->all[g->n_all++] = d;
    return d;
}

#define SET(name, d, attr, type, n, ptr) OK(name, g->api->BackendSetAttribute((d), (attr), (type), (n), (ptr)))
#define FINALIZE(name, d) OK(name, g->api->BackendFinalize(d))

static void add_op(cg_graph *g, const char *name, cudnnBackendDescriptor_t op) {
    if (g->st != MT_OK || !op) return;
    if (g->n_ops == CG_MAX_OPS) {
        g->st = mt_fail(MT_ERR_BACKEND, "cuDNN graph %s: more than %d operations", name, CG_MAX_OPS);
        return;
    }
    g->ops[g->n_ops++] = op;
}

cudnnBackendDescriptor_t cg_tensor(cg_graph *g, const char *name, int64_t uid, cudnnDataType_t type, cg_shape s,
                                   int flags) {
    cudnnBackendDescriptor_t t = make(g, name, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    if (!t) return NULL;
    int64_t align = 16;
    bool yes = true;
    if (!SET(name, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type) ||
        !SET(name, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, s.dim) ||
        !SET(name, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, s.stride) ||
        !SET(name, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) ||
        !SET(name, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align))
        return NULL;
    if ((flags & CG_VIRTUAL) && !SET(name, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes)) return NULL;
    if ((flags & CG_BY_VALUE) && !SET(name, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes))
        return NULL;
    return FINALIZE(name, t) ? t : NULL;
}

cudnnBackendDescriptor_t cg_virtual(cg_graph *g, const char *name, cudnnDataType_t type, cg_shape s) {
    return cg_tensor(g, name, g->next_uid++, type, s, CG_VIRTUAL);
}

void cg_pointwise(cg_graph *g, const char *name, cudnnPointwiseMode_t mode, cudnnDataType_t compute, int64_t axis,
                  cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                  cudnnBackendDescriptor_t y) {
    if (g->st != MT_OK) return;
    cudnnBackendDescriptor_t pw = make(g, name, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    if (!pw || !SET(name, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ||
        !SET(name, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute))
        return;
    if (axis >= 0 && !SET(name, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis)) return;
    if (!FINALIZE(name, pw)) return;
    cudnnBackendDescriptor_t op = make(g, name, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    float one = 1.0f;
    if (!op || !SET(name, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one))
        return;
    if (b && !SET(name, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b)) return;
    if (t && !SET(name, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t)) return;
    if (FINALIZE(name, op)) add_op(g, name, op);
}

void cg_matmul(cg_graph *g, const char *name, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
               cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t m_override, cudnnBackendDescriptor_t n_override,
               cudnnBackendDescriptor_t k_override) {
    if (g->st != MT_OK) return;
    cudnnBackendDescriptor_t mm = make(g, name, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    if (!mm || !SET(name, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32) || !FINALIZE(name, mm)) return;
    cudnnBackendDescriptor_t op = make(g, name, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    if (!op || !SET(name, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm))
        return;
    if (m_override &&
        !SET(name, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m_override))
        return;
    if (n_override &&
        !SET(name, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n_override))
        return;
    if (k_override &&
        !SET(name, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k_override))
        return;
    if (FINALIZE(name, op)) add_op(g, name, op);
}

void cg_reduction(cg_graph *g, const char *name, cudnnReduceTensorOp_t rop, int set_deterministic,
                  cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    if (g->st != MT_OK) return;
    cudnnBackendDescriptor_t rd = make(g, name, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    bool no = false;
    if (!rd || !SET(name, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32) ||
        !SET(name, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &rop))
        return;
    if (set_deterministic && !SET(name, rd, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &no)) return;
    if (!FINALIZE(name, rd)) return;
    cudnnBackendDescriptor_t op = make(g, name, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    if (!op || !SET(name, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd))
        return;
    if (FINALIZE(name, op)) add_op(g, name, op);
}

void cg_reshape(cg_graph *g, const char *name, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    if (g->st != MT_OK) return;
    cudnnBackendDescriptor_t op = make(g, name, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    if (!op || !SET(name, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        !SET(name, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y))
        return;
    if (FINALIZE(name, op)) add_op(g, name, op);
}

// The engine configurations the heuristics of `mode` propose, best first (owned by g).
static int heuristics(cg_graph *g, cudnnBackendDescriptor_t opgraph, cudnnBackendHeurMode_t mode,
                      cudnnBackendDescriptor_t **cfgs) {
    const char *name = "heuristics";
    cudnnBackendDescriptor_t heur = make(g, name, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    if (!heur || !SET(name, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &opgraph) ||
        !SET(name, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) || !FINALIZE(name, heur))
        return 0;
    int64_t count = 0;
    if (!OK(name, g->api->BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                              &count, NULL)))
        return 0;
    if (count <= 0) return 0;
    if (count > 64) count = 64; // the best few are enough; the first that finalizes wins
    cudnnBackendDescriptor_t *c = (cudnnBackendDescriptor_t *)calloc((size_t)count, sizeof *c);
    if (!c) {
        g->st = mt_fail(MT_ERR_MEMORY, "cuDNN heuristics: out of host memory");
        return 0;
    }
    for (int64_t i = 0; i < count; i++)
        if (!(c[i] = make(g, name, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))) {
            free(c);
            return 0;
        }
    int64_t got = 0;
    if (!OK(name, g->api->BackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              count, &got, c))) {
        free(c);
        return 0;
    }
    *cfgs = c;
    return (int)(got < count ? got : count);
}

mt_status cg_build_plan(cg_graph *g, cudnnHandle_t h, cudnnBackendDescriptor_t *plan, int64_t *workspace_bytes) {
    *plan = NULL;
    *workspace_bytes = 0;
    if (g->st != MT_OK) return g->st;
    const char *name = "operation graph";
    cudnnBackendDescriptor_t opg = make(g, name, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!opg || !SET(name, opg, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops) ||
        !SET(name, opg, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) || !FINALIZE(name, opg))
        return g->st;
    // Mode A first (what the frontend and llm.c use); the fallback list only if A offers nothing that finalizes.
    const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    int tried = 0;
    for (int m = 0; m < 2 && !*plan; m++) {
        cudnnBackendDescriptor_t *cfgs = NULL;
        int n = heuristics(g, opg, modes[m], &cfgs);
        if (g->st != MT_OK) {
            if (m == 0) { // mode A refused the graph outright; the fallback may still take it
                g->st = MT_OK;
                continue;
            }
            return g->st;
        }
        for (int i = 0; i < n && !*plan; i++) {
            cudnnBackendDescriptor_t p = make(g, "execution plan", CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
            if (!p || !SET("execution plan", p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
                !SET("execution plan", p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &cfgs[i])) {
                free(cfgs);
                return g->st;
            }
            tried++;
            last = g->api->BackendFinalize(p); // an engine that cannot run this graph says so here
            if (last == CUDNN_STATUS_SUCCESS) *plan = p;
        }
        free(cfgs);
    }
    if (!*plan) {
        char what[160];
        snprintf(what, sizeof what, "no engine finalized an execution plan (%d configurations tried)", tried);
        return g->st = mt_cudnn_fail(g->api, last, what, __FILE__, __LINE__);
    }
    int64_t n = 0;
    if (!OK("execution plan", g->api->BackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                          CUDNN_TYPE_INT64, 1, &n, workspace_bytes)))
        return g->st;
    return MT_OK;
}
